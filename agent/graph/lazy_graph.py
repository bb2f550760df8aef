"""The investigation graph, compiled on first use.

Importing LangGraph and opening the checkpointer's pool cost a command most of its start-up time, and the
read commands (`list`, `show`, `case show`) never run a graph; CaseService holds this stand-in, which
imports, opens and compiles the real graph the first time one of its methods is awaited, once per service.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any


class LazyGraph:
    """The compiled graph's methods CaseService uses, each compiling the graph first if it is not yet."""

    def __init__(self, libpq_url: str, exit_stack: AsyncExitStack) -> None:
        self._libpq_url = libpq_url
        self._exit_stack = exit_stack  # closes the checkpointer's pool with the service
        self._compiled: Any = None
        self._compiling = asyncio.Lock()

    @property
    def compiled_yet(self) -> bool:
        return self._compiled is not None

    async def compiled(self) -> Any:
        async with self._compiling:
            if self._compiled is None:
                from agent.graph.checkpoint import open_checkpointer
                from agent.graph.graph import build_graph

                saver = await self._exit_stack.enter_async_context(open_checkpointer(self._libpq_url))
                self._compiled = build_graph(saver)
        return self._compiled

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self.compiled()).ainvoke(*args, **kwargs)

    async def aget_state(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self.compiled()).aget_state(*args, **kwargs)

    async def aupdate_state(self, *args: Any, **kwargs: Any) -> Any:
        return await (await self.compiled()).aupdate_state(*args, **kwargs)

    async def aget_state_history(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for snapshot in (await self.compiled()).aget_state_history(*args, **kwargs):
            yield snapshot

    async def adelete_thread(self, thread_id: str) -> None:
        await (await self.compiled()).checkpointer.adelete_thread(thread_id)
