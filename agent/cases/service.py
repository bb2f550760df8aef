"""CaseService: the case lifecycle for the callers that hold one (the CLI, the Slack bot, the evaluation),
and `case_service`, which opens one on a database with the policy it is to enforce.

The lifecycle itself lives in one module per verb, each a set of functions over a CaseRunner (the engine,
the graph, the policy in force, the case lock): opening, deciding, rounds, settling, sweep, recovery, with
record (the cases row and its JSON) beside them. CaseService is that runner with the verbs as its methods:
each line below only names the function a method is.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases import deciding, opening, record, recovery, rounds, settling
from agent.cases import sweep as periodic
from agent.cases.runner import CaseRunner
from agent.graph.configuration import Configuration
from agent.graph.lazy_graph import LazyGraph
from agent.model import budget
from agent.model.clients import model_clients_held
from approvals import activity, policy_store
from approvals.config import ApprovalSettings
from engine.db import create_engine

log = logging.getLogger(__name__)

# The service's pool keeps every connection it opens, up to the 15 SQLAlchemy's default allows (5 + 10
# overflow): overflow connections were closed as soon as they were back, so a burst of mentions opened and
# closed more than one Postgres backend per mention, each new one warming its catalog caches again.
POOL_CONNECTIONS = 15


class CaseService(CaseRunner):
    """The verbs of agent/cases/, as methods of the runner they take."""

    # opening
    new_case_id = opening.new_case_id
    register_case = opening.register_case
    open_case = opening.open_case
    choose_customer = opening.choose_customer
    abandon = opening.abandon

    # reading
    async def case_row(self, case_id: str) -> Any:
        return await record.case_row(self.engine, case_id)

    async def show_case(self, case_id: str) -> dict[str, Any]:
        return await record.show_case(self.engine, case_id)

    sync_case = record.sync_case

    # deciding
    decide = deciding.decide
    request_changes = deciding.request_changes
    cancel = deciding.cancel
    resume = deciding.resume
    take_note_outcome = deciding.take_note_outcome
    # rounds
    resubmit = rounds.resubmit
    accept_answer = rounds.accept_answer
    run_round = rounds.run_round
    # settling and the periodic sweep
    settle_waiting_cases = settling.settle_waiting_cases
    held_too_long = settling.held_too_long
    expire_overdue = periodic.expire_overdue
    sweep = periodic.sweep
    # recovery
    recover = recovery.recover
    unfinished_cases = recovery.unfinished_cases
    retry_interrupted = recovery.retry_interrupted
    prune_finished = recovery.prune_finished


# How a service comes by its policy (see `case_service`).
FIXED, COMMAND, BOT_START = "fixed", "command", "bot start"


@asynccontextmanager
async def case_service(
    libpq_url: str,
    configuration: Configuration | None = None,
    approval_settings: ApprovalSettings | None = None,
    *,
    policy: str | None = None,
    actor: str = activity.BILLSLEUTH,
) -> AsyncIterator[CaseService]:
    """A ready CaseService on this database: its engine now; its graph and checkpointer pool when a case
    first needs them (a read command never does).

    `policy` — how it comes by the policy it enforces; `approval_settings` (default: the environment's)
    are this process's own:
    - COMMAND (the default without settings): the database's stored policy; when there is none yet, its
      own is stored first (by `actor`). Where its own disagrees is in `policy_differences`, for a warning.
    - BOT_START: its own is proposed as the stored policy (by `actor`): what narrows power applies at
      once, what widens it waits for an approver's consent in Slack (approvals.policy_store.propose); the
      stored policy is then enforced.
    - FIXED (the default with settings): exactly the given settings, the store neither read nor written
      (tests and the evaluation, which pin their own policy).
    """
    mode = policy or (FIXED if approval_settings is not None else COMMAND)
    own = approval_settings or ApprovalSettings.from_env()
    engine = create_engine(libpq_url, pool_size=POOL_CONNECTIONS, max_overflow=0)
    try:
        settings, differences = await _policy_for(engine, own, mode, actor)
        # The checkpointer's pool once a graph runs; the model clients (shared by every case) once a case
        # asks a model, closed when the service closes.
        async with AsyncExitStack() as graph_resources, model_clients_held():
            yield CaseService(
                engine,
                LazyGraph(libpq_url, graph_resources),
                configuration or Configuration.from_env(),
                settings,
                follows_stored_policy=mode != FIXED,
                policy_differences=differences,
            )
    finally:
        await engine.dispose()


async def _policy_for(
    engine: AsyncEngine, own: ApprovalSettings, mode: str, actor: str
) -> tuple[ApprovalSettings, tuple[policy_store.Difference, ...]]:
    if mode == FIXED:
        return own, ()
    if mode == BOT_START:  # its environment is a proposal: what widens power waits for consent
        proposal = await policy_store.propose(
            engine,
            own,
            proposer=actor,
            source=policy_store.BOT_START,
            why=policy_store.BOT_START,
            on_apply=budget.apply_policy_change,
        )
        if proposal.pending is not None:
            log.warning(
                "this environment's policy widens power: policy change #%s waits for an approver's "
                "consent in Slack; until then the stored policy holds",
                proposal.pending.id,
            )
        return proposal.settings, proposal.differences
    if mode != COMMAND:
        raise ValueError(f"policy must be {FIXED!r}, {COMMAND!r} or {BOT_START!r}, not {mode!r}")
    in_force = await policy_store.policy_in_force(engine, own, actor_type=activity.USER, actor_id=actor)
    return in_force.settings, in_force.differences
