"""A progress bar for long sweeps, on stderr and only on a terminal.

`render` is pure (the line for given counts and elapsed time); `ProgressBar` redraws it in place at most
ten times a second. `progress_bar` gives one only when stderr is a TTY: piped or redirected, stderr stays
exactly as it was (warnings only), and stdout (the table, or --json) is never touched.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 24  # characters of the bar itself
REDRAW_EVERY = 0.1  # seconds


def _duration(seconds: float) -> str:
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    minutes, seconds_left = divmod(whole, 60)
    return f"{minutes} min {seconds_left:02d} s"


def render(label: str, done: int, total: int, elapsed: float, unit: str = "customers") -> str:
    """e.g. `audit [######------------------]  1,000/4,000 customers  25%  850 customers/s  ETA 4 s`."""
    fraction = min(1.0, done / total) if total > 0 else 1.0
    filled = int(WIDTH * fraction)
    rate = done / elapsed if elapsed > 0 else 0.0
    if done >= total:
        eta = f"done in {_duration(elapsed)}"
    elif rate > 0:
        eta = f"ETA {_duration((total - done) / rate)}"
    else:
        eta = "ETA --"
    return (
        f"{label} [{'#' * filled}{'-' * (WIDTH - filled)}]  {done:,}/{total:,} {unit}  "
        f"{fraction:.0%}  {rate:,.0f} {unit}/s  {eta}"
    )


class ProgressBar:
    """Callable as agent.auditor.run's progress: (customers done, customers in all)."""

    def __init__(
        self, label: str, stream: TextIO, clock: Callable[[], float] = time.monotonic, unit: str = "customers"
    ) -> None:
        self.label, self.stream, self.clock, self.unit = label, stream, clock, unit
        self.started = clock()
        self.drawn_at: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and self.drawn_at is not None and now - self.drawn_at < REDRAW_EVERY:
            return
        self.drawn_at = now
        # \r back to the start of the line, \x1b[K clears what a longer earlier line left behind.
        self.stream.write(f"\r{render(self.label, done, total, now - self.started, self.unit)}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line, so what follows on stderr starts on a line of its own."""
        if self.drawn_at is not None:
            self.stream.write("\n")
            self.stream.flush()


def progress_bar(label: str, stream: TextIO | None = None, unit: str = "customers") -> ProgressBar | None:
    """A bar on stderr when it is a terminal; None (no output at all) otherwise."""
    stream = stream if stream is not None else sys.stderr
    return ProgressBar(label, stream, unit=unit) if stream.isatty() else None
