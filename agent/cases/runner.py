"""What every verb of the case lifecycle needs: the engine, the graph, the policy in force, and the case
lock that keeps one graph run per case across processes.

The verbs (opening, deciding, rounds, settling, sweep, recovery) are functions over a CaseRunner;
`agent.cases.service.CaseService` is this runner with the verbs as its methods, for the callers that hold one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.graph.configuration import CaseContext, Configuration
from agent.graph.lazy_graph import LazyGraph
from agent.graph.state import CaseState, CaseStatus
from agent.model.costs import SpendSettings
from approvals import policy_store
from approvals.config import ApprovalSettings
from engine import locks, schema
from engine.db import autocommit
from engine.logcontext import bind

if TYPE_CHECKING:
    from langgraph.types import Durability

ProgressCallback = Callable[[dict[str, Any]], None]
WAITING_NODE = "await_approval"  # the graph's node that pauses for a decision on the credit note
MAX_CASE_LOCK_HOLDERS = 6


@dataclass
class CaseRunner:
    engine: AsyncEngine
    graph: LazyGraph  # compiled on first use (agent.graph.lazy_graph); the bot compiles it at start
    configuration: Configuration
    approval_settings: ApprovalSettings
    # True when the settings are the database's stored policy (re-read before every decision, so a bot
    # started since, or `policy apply`, is obeyed at once); False for settings a caller fixed (tests, eval).
    follows_stored_policy: bool = False
    # Where this process's own environment disagrees with the stored policy (it warns; the stored one holds).
    policy_differences: tuple[policy_store.Difference, ...] = ()
    # A case lock holds a pooled connection for a whole graph run, which checks out more of its own. With
    # at most this many holders per process the pool (5 + 10 overflow) always has connections left for
    # them, so holders never end up waiting on each other for one.
    _lock_holders: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(MAX_CASE_LOCK_HOLDERS), init=False, repr=False
    )

    async def settings_in_force(self) -> ApprovalSettings:
        """The policy to decide by: the stored one as it is now, when this service follows it (another
        bot's start or `policy apply` may have changed it since this process began)."""
        if self.follows_stored_policy:
            stored = await policy_store.read_policy(self.engine)
            if stored is not None:
                self.approval_settings = stored
        return self.approval_settings

    async def state_of(self, case_id: str) -> Any:
        return await self.graph.aget_state(thread_config(case_id))

    async def investigate(
        self, case_id: str, state: CaseState, on_progress: ProgressCallback | None = None
    ) -> dict[str, Any]:
        """Run the graph on the case from `state` (a new run, or a new round) to its pause or end."""
        await self.settings_in_force()  # the model budget it runs under is the stored one, as it is now
        return await self.graph.ainvoke(  # type: ignore[no-any-return]
            state,
            thread_config(case_id),
            context=self.context(on_progress),
            durability=self._investigation_durability(),
        )

    async def take_up(self, case_id: str, message_ts: str | None = None) -> bool:
        """queued → investigating, under the case lock; False when another run already took it up."""
        cases = schema.cases.c
        async with autocommit(self.engine) as conn:  # one UPDATE … RETURNING: a compare-and-set
            taken = await conn.execute(
                update(schema.cases)
                .where(cases.id == case_id, cases.status == CaseStatus.QUEUED)
                .values(
                    status=CaseStatus.INVESTIGATING,
                    message_ts=func.coalesce(message_ts, cases.message_ts),
                    updated_at=func.now(),
                )
                .returning(cases.id)
            )
            return taken.first() is not None

    def context(self, on_progress: ProgressCallback | None) -> CaseContext:
        return CaseContext(self.engine, self._configuration_in_force(), self.approval_settings, on_progress)

    def _investigation_durability(self) -> Durability:
        """How often an investigation run is checkpointed, up to its pause or end.

        A model's steps cost tokens and minutes to redo: checkpoint each one before the next starts. The
        offline auditor redoes a whole run in milliseconds with the same result, so its run is written
        once, when it pauses, ends or fails (a failure is checkpointed where it happened). A process killed
        mid-run leaves no checkpoint, and recovery runs the case again from the top: its tool calls are
        then on the trail twice (both runs happened), and drafting's idempotency key returns the same note
        for the same verified amount. Resuming after a decision (which issues money) is always
        checkpointed step by step.
        """
        return "sync" if self.configuration.investigator == "llm" else "exit"

    def _configuration_in_force(self) -> Configuration:
        """Model spend rules are policy (issue 25 item 6): a service that follows the stored policy runs
        models under its budget and prices, whatever this process's own environment says."""
        if not self.follows_stored_policy:
            return self.configuration
        spend = SpendSettings.of_policy(self.approval_settings)
        return self.configuration.model_copy(update={"spend": spend})

    @asynccontextmanager
    async def case_lock(self, case_id: str, *, wait: bool = True) -> AsyncIterator[bool]:
        """Hold the case's advisory lock (one graph run per case across processes); yields whether it
        was taken — always True when waiting, False when `wait=False` and another process holds it."""
        key = locks.case(case_id)
        # A session-level lock needs no transaction: in autocommit, no BEGIN and COMMIT around the run.
        async with self._lock_holders, autocommit(self.engine) as conn:
            if wait:
                await locks.session_lock(conn, key)
                taken = True
            else:
                taken = await locks.try_session_lock(conn, key)
            try:
                with bind(case_id=case_id):  # every log line of this run names the case
                    yield taken
            finally:
                if taken:
                    await locks.session_unlock(conn, key)
                await conn.commit()


def thread_config(case_id: str) -> dict[str, Any]:
    """The graph's config for a case: its checkpoint thread is the case id."""
    return {"configurable": {"thread_id": case_id}, "recursion_limit": 50}
