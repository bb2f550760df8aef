"""The order the suite's tests are handed to pytest-xdist's workers in: the slowest first, spread so that
each worker starts with its share of them.

`--dist worksteal` gives each of the W workers one contiguous batch of the collected tests (the first
worker len//W of them, the next a W-1th of the rest, and so on), then lets a worker that ran out take the
back half of the longest queue left. Nothing is taken from the test a worker is running, so one of the
minute-long tests below that falls late in a batch was run alone at the end while the other workers
waited: the packaging test started 788 s into a 913 s run and ended it 20 s after the others had finished.
Started first, the slow tests run beside the many short ones, and stealing evens out the short ones.

Only the order changes: every test still runs, once, on a database of its own."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

# The slowest tests with their seconds (setup and call) in two full runs on the 2-core machine while two
# other suites ran beside them (December 3, 2026; on a quiet machine each took about a third as long).
# Only their relative sizes matter: they decide which worker starts which. A test renamed or removed
# here is simply no longer started early.
SLOWEST: dict[str, float] = {
    "tests/test_packaging.py::test_the_wheel_runs_from_any_directory": 160,
    "tests/bot/test_crash_recovery.py::"
    "test_a_bot_killed_around_an_approve_click_leaves_every_card_telling_the_truth": 150,
    "tests/test_cases.py::test_case_opened_in_one_process_is_approved_from_another": 60,
    "tests/test_demo.py::test_the_demo_cli_never_touches_the_users_database_and_runs_twice": 60,
    "tests/test_cli_identity.py::test_two_as_from_one_os_account_count_once_and_the_note_is_not_issued": 56,
    "tests/test_cases.py::test_an_approved_note_held_by_the_daily_limit_is_cancelled_from_the_cli": 56,
    "tests/bot/test_scale_out.py::test_every_event_delivered_to_both_processes_opens_one_case": 54,
    "tests/bot/test_scale_out.py::"
    "test_two_processes_share_the_daily_sweep_shard_by_shard_and_post_one_digest": 50,
    "tests/test_eval.py::test_eval_scores_another_seeds_dataset_from_its_files": 50,
    "tests/test_eval.py::test_eval_on_an_empty_database_seeds_the_default_dataset_and_scores_it": 45,
    "tests/test_policy.py::test_the_os_account_that_opened_a_case_cannot_decide_it_under_any_as": 43,
    "tests/bot/test_crash_recovery.py::"
    "test_a_bot_killed_with_mentions_in_flight_answers_every_one_after_a_restart": 42,
    "tests/bot/test_scale_out.py::test_a_click_delivered_to_both_processes_is_one_vote_and_one_decision": 43,
    "tests/bot/test_scale_out.py::test_the_outbox_drained_by_both_processes_delivers_each_change_once": 39,
    "tests/bot/test_lifecycle.py::test_two_bot_processes_on_one_postgres_act_as_one": 30,
    "tests/test_eval.py::test_eval_leaves_the_ledger_as_it_stands_and_repeats_from_untouched_copies": 30,
    "tests/test_languages.py::test_eval_languages_reports_each_language_with_its_replies_in_it": 32,
    "tests/bot/test_policy_changes.py::test_a_budget_raise_waits_for_an_approver_who_did_not_propose_it": 29,
    "tests/test_demo.py::test_the_demo_shows_every_outcome_and_saves_valid_block_kit": 27,
    "tests/test_eval.py::test_an_interrupted_eval_drops_its_scratch_databases": 20,
    "tests/test_cli_imports.py::test_opening_a_case_still_loads_the_graph_when_it_runs_one": 20,
}

Item = TypeVar("Item")


def xdist_workers() -> int:
    """How many pytest-xdist workers share this run (0 outside one). A worker's own options no longer
    say how the tests are handed out (xdist resets --dist there), so the batches are sized for
    worksteal, `make test`'s: under another mode the slow tests still start early, which only helps."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))


def slowest_first(items: Sequence[Item], node_ids: Sequence[str], workers: int) -> list[Item]:
    """`items` (with their node ids) reordered so each of `workers` first batches starts with its share of
    SLOWEST — shared out largest first, each to the batch with the fewest seconds so far — followed by the
    other tests in their collected order."""
    slow = sorted(
        (i for i, node_id in enumerate(node_ids) if node_id in SLOWEST), key=lambda i: -SLOWEST[node_ids[i]]
    )
    chosen = set(slow)
    rest = [item for i, item in enumerate(items) if i not in chosen]
    heads: list[list[Item]] = [[] for _ in range(workers)]
    seconds = [0.0] * workers
    for i in slow:
        lightest = seconds.index(min(seconds))
        heads[lightest].append(items[i])
        seconds[lightest] += SLOWEST[node_ids[i]]
    ordered: list[Item] = []
    left = len(items)
    for worker, head in enumerate(heads):
        batch = left // (workers - worker)  # as worksteal's first hand-out sizes it
        left -= batch
        filler = max(0, batch - len(head))
        ordered += head + rest[:filler]
        rest = rest[filler:]
    return ordered + rest
