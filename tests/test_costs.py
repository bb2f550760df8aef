"""The cost ledger and the monthly model budget, against the scripted OpenAI-compatible server that
reports usage and response ids, a real Postgres, and the `billsleuth` command (in a process of its own
where a restart is the point).

- every response is costed once (a replayed response id, an SDK retry, a refused attempt are not
  counted twice or at all); a model without a price has its tokens recorded and a null cost;
- eight cases at once with "a little left": one model run reserves its worst case, the others go to the
  offline auditor, and spend passes the limit by one call at most;
- the pause is in the database: a new service, a new process, still sees it; `budget raise` by an
  approver lifts it (recorded), by anyone else is refused in one line.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from agent.cases.service import case_service
from agent.graph.configuration import Configuration
from agent.model.budget import month_of, standing
from agent.model.costs import DEFAULT_PRICES, ModelPrice, SpendSettings
from engine import schema
from engine.db import create_engine
from tests import cli
from tests.openai_stub import HttpError, OpenAIStub, Reply, Usage, call, unknown_field_errors
from tests.test_llm import FAULTY, SCENARIOS, SETTINGS, correct_model, llm_configuration, rows, scenario

BILLSLEUTH = Path(sys.executable).with_name("billsleuth")
# A model priced so the figures are easy: 1000 prompt + 100 reply tokens cost 0.10 + 0.10 = 0.20 USD.
PRICED = {"stub-model": ModelPrice(Decimal("100"), Decimal("1000"), Decimal("50"))}
ONE_CALL = Usage(1000, 100)
CALL_COST = Decimal("0.200000")


@pytest.fixture
async def db_url(seeded_db_url: str) -> str:
    return seeded_db_url


def spend(budget: str | None = None, prices: dict[str, ModelPrice] | None = None) -> SpendSettings:
    return SpendSettings(
        prices={**DEFAULT_PRICES, **(PRICED if prices is None else prices)},
        monthly_budget=Decimal(budget) if budget else None,
    )


async def cost_events(db_url: str) -> list[Any]:
    return await rows(db_url, select(schema.cost_events).order_by(schema.cost_events.c.id))


async def spend_already(db_url: str, amount: str) -> None:
    """Spend recorded earlier this month (another case's calls)."""
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO cost_events (case_id, model, endpoint, input_tokens, output_tokens, cost, "
                    "response_id) VALUES ('CASE-0000', 'stub-model', '127.0.0.1', 1, 1, :cost, 'earlier')"
                ),
                {"cost": Decimal(amount)},
            )
    finally:
        await engine.dispose()


async def budget_standing(db_url: str, settings: SpendSettings) -> Any:
    engine = create_engine(db_url)
    try:
        return await standing(engine, settings)
    finally:
        await engine.dispose()


def command_env(db_url: str, env: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "BILLSLEUTH_"))}
    return {**clean, "DATABASE_URL": db_url, **env}


def billsleuth(db_url: str, *args: str, **env: str) -> cli.Done:
    """The command run in this process (tests/cli.py)."""
    return cli.billsleuth(*args, env=command_env(db_url, env))


def billsleuth_process(db_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own: for what must hold across a restart."""
    return subprocess.run(
        [str(BILLSLEUTH), *args], capture_output=True, text=True, env=command_env(db_url, env), timeout=120
    )


# ---- the ledger ------------------------------------------------------------------------------------------


async def test_every_response_is_costed_once_from_its_usage(db_url: str) -> None:
    sc = scenario(FAULTY)
    # The first turn is asked twice (the SDK retries a 500): one response, one cost event.
    cached = Usage(2000, 300, cached_tokens=1500)
    script = [HttpError(500), *correct_model(sc["truth"])]
    async with OpenAIStub(script, usage=cached) as stub:
        configuration = llm_configuration(stub, model="gpt-4o-mini", max_retries=1)
        async with case_service(db_url, configuration, SETTINGS) as service:
            case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
    assert case["status"] == "awaiting_approval", case["escalation_reason"]
    events = await cost_events(db_url)
    assert len(stub.requests) == 4 and len(events) == 3
    assert len({e.response_id for e in events}) == 3
    # gpt-4o-mini: 500 × 0.15 + 1500 × 0.075 + 300 × 0.60 per 1M = 0.0003675 USD, kept to six decimals
    assert {(e.case_id, e.model, e.input_tokens, e.output_tokens, e.cached_tokens) for e in events} == {
        (case["case_id"], "gpt-4o-mini", 2000, 300, 1500)
    }
    assert [e.cost for e in events] == [Decimal("0.000368")] * 3
    assert events[0].endpoint == f"127.0.0.1:{stub.port}"
    assert case["model_cost"] == {"input_tokens": 6000, "output_tokens": 900, "cost": "0.001104"}


async def test_a_replayed_response_is_not_counted_twice(db_url: str) -> None:
    first, second = scenario(FAULTY), scenario(FAULTY, nth=1)
    replayed = Reply(tool_calls=call("list_invoices").tool_calls, response_id="chatcmpl-replayed")
    script = [replayed, *correct_model(first["truth"]), replayed, *correct_model(second["truth"])]
    async with (
        OpenAIStub(script, usage=ONE_CALL) as stub,
        case_service(db_url, llm_configuration(stub), SETTINGS) as service,
    ):
        service.configuration = service.configuration.model_copy(update={"spend": spend()})
        cases = [
            await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
            for sc in (first, second)
        ]
    events = await cost_events(db_url)
    assert len(stub.requests) == 8 and len(events) == 7  # the replayed id is on the ledger once
    assert [e.response_id for e in events].count("chatcmpl-replayed") == 1
    assert sum(e.cost for e in events) == 7 * CALL_COST
    assert [c["model_cost"]["cost"] for c in cases] == ["0.800000", "0.600000"]


async def test_a_refused_attempt_costs_nothing_and_a_reply_without_usage_costs_null(db_url: str) -> None:
    sc = scenario(FAULTY)
    *steps, conclude = correct_model(sc["truth"])
    first = steps[0]
    assert isinstance(first, Reply)
    script = [Reply(tool_calls=first.tool_calls, no_usage=True), *steps[1:], conclude]
    refusal = unknown_field_errors("max_completion_tokens")["vllm"]
    async with (
        OpenAIStub(script, usage=ONE_CALL, unknown_fields={"max_completion_tokens": refusal}) as stub,
        case_service(db_url, llm_configuration(stub), SETTINGS) as service,
    ):
        service.configuration = service.configuration.model_copy(update={"spend": spend()})
        case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
    events = await cost_events(db_url)
    assert len(stub.requests) == 4 and len(events) == 3
    assert [(e.input_tokens, e.cost) for e in events] == [(0, None), (1000, CALL_COST), (1000, CALL_COST)]
    assert case["model_cost"] == {"input_tokens": 2000, "output_tokens": 200, "cost": None}


async def test_a_model_without_a_price_records_tokens_and_null_cost_and_doctor_says_so(db_url: str) -> None:
    sc = scenario(FAULTY)
    async with OpenAIStub(correct_model(sc["truth"]), usage=ONE_CALL) as stub:
        async with case_service(db_url, llm_configuration(stub), SETTINGS) as service:  # stub-model: no price
            case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
        events = await cost_events(db_url)
        assert [(e.model, e.input_tokens, e.output_tokens, e.cost) for e in events] == [
            ("stub-model", 1000, 100, None)
        ] * 3
        assert case["model_cost"] == {"input_tokens": 3000, "output_tokens": 300, "cost": None}
        env = {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": stub.base_url, "BILLSLEUTH_MODEL": "stub-model"}
        doctor = await asyncio.to_thread(billsleuth, db_url, "doctor", **env)
        priced = await asyncio.to_thread(
            billsleuth,
            db_url,
            "doctor",
            **env,
            BILLSLEUTH_MODEL_PRICES='{"stub-model": {"input": 1, "output": 2}}',
        )
    assert "! model costs: no price for model stub-model" in doctor.stdout, doctor.stdout
    assert "BILLSLEUTH_MODEL_PRICES" in doctor.stdout
    assert "✓ model costs: stub-model at $1 in / $2 out per 1M tokens" in priced.stdout, priced.stdout


def test_costs_json_groups_by_case_model_and_day(db_url: str) -> None:
    import psycopg

    with psycopg.connect(db_url) as conn:
        for case_id, model, tokens, cost, at in [
            ("CASE-0001", "gpt-4o-mini", (1000, 100, 0), "0.000210", "2026-11-30 23:59:00+00"),
            ("CASE-0001", "gpt-4o-mini", (2000, 50, 1000), "0.000255", "2026-12-01 00:01:00+00"),
            ("CASE-0002", "mystery-model", (500, 10, 0), None, "2026-12-01 08:00:00+00"),
        ]:
            conn.execute(
                "INSERT INTO cost_events (case_id, model, endpoint, input_tokens, output_tokens, "
                "cached_tokens, cost, response_id, at) VALUES (%s, %s, 'api.openai.com', %s, %s, %s, %s, "
                "%s, %s)",
                (case_id, model, *tokens, cost, f"r-{at}", at),
            )
    by_case = json.loads(billsleuth(db_url, "costs", "--by", "case", "--json").stdout)
    assert by_case == {
        "by": "case",
        "since": None,
        "rows": [
            {"key": "CASE-0001", "input_tokens": 3000, "output_tokens": 150, "cached_tokens": 1000,
             "cost": "0.000465"},
            {"key": "CASE-0002", "input_tokens": 500, "output_tokens": 10, "cached_tokens": 0, "cost": None},
        ],
        "total": {"input_tokens": 3500, "output_tokens": 160, "cached_tokens": 1000, "cost": None},
    }  # fmt: skip
    by_model = json.loads(billsleuth(db_url, "costs", "--by", "model", "--json").stdout)
    assert [(r["key"], r["cost"]) for r in by_model["rows"]] == [
        ("gpt-4o-mini", "0.000465"),
        ("mystery-model", None),
    ]
    since = json.loads(billsleuth(db_url, "costs", "--since", "2026-12-01", "--json").stdout)
    assert since["by"] == "day" and since["since"] == "2026-12-01"
    assert [(r["key"], r["cost"]) for r in since["rows"]] == [("2026-12-01", None)]
    assert since["total"]["input_tokens"] == 2500
    text_report = billsleuth(db_url, "costs", "--by", "model")
    assert text_report.returncode == 0 and "mystery-model" in text_report.stdout
    assert "unknown" in text_report.stdout
    bad = billsleuth(db_url, "costs", "--since", "yesterday")
    assert (bad.returncode, bad.stderr.strip()) == (
        2,
        "billsleuth: error: --since 'yesterday' is not a date; write YYYY-MM-DD",
    )


# ---- the budget ------------------------------------------------------------------------------------------


def credit_scenarios(n: int) -> list[dict[str, Any]]:
    """n overcharge scenarios of n different customers."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(SCENARIOS.glob("S*.json")):
        sc = json.loads(path.read_text())
        if sc["truth"]["expected_action"] == "credit_note":
            found.setdefault(sc["customer_id"], sc)
    return list(found.values())[:n]


def budgeted(stub: OpenAIStub, budget: str = "1.00", **overrides: Any) -> Any:
    # One call's worst case: 400 reply tokens × 1000 + 1000 prompt tokens × 100 per 1M = 0.50 USD;
    # a run of 6 steps reserves 3.00.
    configuration = llm_configuration(stub, reserve_input_tokens=1000, **overrides)
    return configuration.model_copy(update={"spend": spend(budget)})


async def test_eight_cases_at_once_cannot_all_spend_what_is_left(db_url: str) -> None:
    """0.10 left of 1.00: without the reservation all eight would ask the model (2.50 spent); with it one
    run starts, its first call (0.20) crosses the limit and it stops there; the others never ask."""
    await spend_already(db_url, "0.90")
    faulty = credit_scenarios(8)
    async with (
        OpenAIStub([call("list_invoices")] * 48, usage=ONE_CALL) as stub,
        case_service(db_url, budgeted(stub), SETTINGS) as service,
    ):
        cases = await asyncio.gather(
            *(
                service.open_case(sc["question"], requester=f"U0SUP{i}", customer_id=sc["customer_id"])
                for i, sc in enumerate(faulty)
            )
        )
    settings = spend("1.00")
    shown = await budget_standing(db_url, settings)
    assert len(stub.requests) == 1
    assert shown.spent == Decimal("1.10") and shown.spent - Decimal("1.00") <= CALL_COST
    assert shown.paused and shown.reserved == 0  # every run's reservation released
    month = month_of()
    notes = sorted(c["investigator_note"] for c in cases)
    ran_out = (
        f"Investigated by the offline auditor: the model budget for {month} ran out during the model's "
        "investigation"
    )
    assert notes.count(ran_out) == 1
    # The others found the rest reserved by the run under way, or (once it crossed) the budget spent.
    others = {
        f"Investigated by the offline auditor: what is left of the model budget for {month} is reserved by "
        "model runs under way",
        f"Investigated by the offline auditor: the model budget for {month} is spent",
    }
    assert len(notes) == 8 and set(notes) - others == {ran_out}, notes
    # Every case still got its answer (the auditor's), and only the one that asked the model carries a cost.
    assert [c["status"] for c in cases] == ["awaiting_approval"] * 8, [c["escalation_reason"] for c in cases]
    assert sum(1 for c in cases if "model_cost" in c) == 1
    incidents = await rows(db_url, select(schema.budget_incidents.c.threshold).order_by("threshold"))
    assert [i.threshold for i in incidents] == [80, 100]
    log = schema.activity_log.c
    actions = await rows(
        db_url, select(log.action, log.entity_id).where(log.action.startswith("budget.")).order_by(log.id)
    )
    assert [(a.action, a.entity_id) for a in actions] == [("budget.warning", month), ("budget.paused", month)]


async def test_a_case_whose_call_crosses_the_limit_makes_no_further_call(db_url: str) -> None:
    sc = scenario(FAULTY)
    await spend_already(db_url, "0.45")  # the run fits (0.45 + 3.00 reserved is past 1.00, but room was left)
    async with (
        OpenAIStub([call("list_invoices")] * 6, usage=ONE_CALL) as stub,
        case_service(db_url, budgeted(stub), SETTINGS) as service,
    ):
        case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
    # 0.45 → 0.65 → 0.85 → 1.05: the third call crossed, and was the last
    assert len(stub.requests) == 3
    assert case["model_cost"]["cost"] == "0.600000"
    assert case["status"] == "awaiting_approval" and "ran out during" in case["investigator_note"]
    trail = await rows(
        db_url,
        select(schema.audit_log.c.actor)
        .where(schema.audit_log.c.case_id == case["case_id"])
        .order_by(schema.audit_log.c.id),
    )
    actors = [t.actor for t in trail]
    assert actors[:3] == ["agent:llm"] * 3 and "agent:offline" in actors

    # The card says who investigated in the model's stead, and what the model's calls cost.
    from bot.cards.text import render_blocks
    from bot.presenters.approver import credit_note_card_message

    async with case_service(db_url, Configuration(investigator="offline"), SETTINGS) as service:
        card = await credit_note_card_message(service, case["credit_note"]["id"])
    shown = render_blocks(card.blocks, width=10_000)
    assert f"Investigated by the offline auditor: the model budget for {month_of()} ran out" in shown
    assert "Model: 3,000 in / 300 out tokens, $0.60" in shown


async def test_a_failed_model_run_releases_its_reservation(db_url: str) -> None:
    sc = scenario(FAULTY)
    async with (
        OpenAIStub([HttpError(503, "overloaded")]) as stub,
        case_service(db_url, budgeted(stub, budget="50.00"), SETTINGS) as service,
    ):
        case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
    assert case["status"] == "escalated"
    shown = await budget_standing(db_url, spend("50.00"))
    assert (shown.reserved, shown.paused) == (0, False)


async def test_the_pause_survives_a_restart_and_lifts_on_budget_raise(db_url: str) -> None:
    sc, later, last = scenario(FAULTY), scenario(FAULTY, nth=1), scenario(FAULTY, nth=2)
    await spend_already(db_url, "0.95")
    month = month_of()
    env = {
        "OPENAI_API_KEY": "test",
        "BILLSLEUTH_MODEL": "stub-model",
        "BILLSLEUTH_MODEL_PRICES": '{"stub-model": {"input": 100, "output": 1000}}',
        "BILLSLEUTH_MODEL_BUDGET": "1.00",
        "BILLSLEUTH_APPROVERS": "U0FIN1",
        "BILLSLEUTH_CLI_DECISIONS": "on",  # a raise from the CLI is a break-glass decision
    }
    async with OpenAIStub([call("list_invoices"), *correct_model(last["truth"])], usage=ONE_CALL) as stub:
        async with case_service(db_url, budgeted(stub), SETTINGS) as service:
            crossed = await service.open_case(
                sc["question"], requester="U0SUP", customer_id=sc["customer_id"]
            )
        assert len(stub.requests) == 1 and "ran out during" in crossed["investigator_note"]
        env["OPENAI_BASE_URL"] = stub.base_url

        # A new process: the pause is in the database.
        shown = json.loads(
            (await asyncio.to_thread(billsleuth_process, db_url, "budget", "show", "--json", **env)).stdout
        )
        assert shown == {
            "month": month,
            "limit": "1.000000",
            "limit_from": "environment",
            "spent": "1.150000",
            "reserved": "0.000000",
            "paused": True,
            "unpriced_calls": 0,
        }
        opened = await asyncio.to_thread(
            billsleuth,
            db_url,
            "case",
            "open",
            later["customer_id"],
            later["question"],
            "--as",
            "U0SUP",
            "--json",
            **env,
        )
        after_restart = json.loads(opened.stdout)
        assert after_restart["investigator_note"] == (
            f"Investigated by the offline auditor: the model budget for {month} is spent"
        )
        assert "model_cost" not in after_restart and len(stub.requests) == 1  # the model was not asked

        refused = await asyncio.to_thread(billsleuth, db_url, "budget", "raise", "5", "--as", "U0SUP", **env)
        assert (refused.returncode, refused.stderr.strip()) == (
            2,
            "billsleuth: error: U0SUP is not an approver: only an approver may raise the model budget",
        )
        bad = await asyncio.to_thread(billsleuth, db_url, "budget", "raise", "lots", "--as", "U0FIN1", **env)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "AMOUNT" in bad.stderr
        huge = await asyncio.to_thread(billsleuth, db_url, "budget", "raise", "1e13", "--as", "U0FIN1", **env)
        assert huge.returncode == 2 and huge.stderr.count("\n") == 1 and "too large" in huge.stderr
        assert (await budget_standing(db_url, spend("1.00"))).paused

        raised = await asyncio.to_thread(
            billsleuth, db_url, "budget", "raise", "5.00", "--as", "U0FIN1", **env
        )
        assert raised.returncode == 0, raised.stderr
        assert "resumed" in raised.stdout
        resumed = await asyncio.to_thread(
            billsleuth,
            db_url,
            "case",
            "open",
            last["customer_id"],
            last["question"],
            "--as",
            "U0SUP",
            "--json",
            **env,
        )
    case = json.loads(resumed.stdout)
    assert case["status"] == "awaiting_approval" and "investigator_note" not in case
    assert case["model_cost"]["cost"] == "0.600000" and len(stub.requests) == 4
    log = schema.activity_log.c
    history = await rows(
        db_url,
        select(log.actor_id, log.action, log.details).where(log.action == "budget.raised").order_by(log.id),
    )
    assert [(h.actor_id, h.details["rule"]) for h in history if "rule" in h.details] == [
        ("U0SUP", "not_an_approver")
    ]
    [done] = [h for h in history if "rule" not in h.details]
    assert (done.actor_id, done.details["old"], done.details["new"], done.details["resumed"]) == (
        "U0FIN1",
        "1.000000",
        "5.000000",
        True,
    )
    # The raise is this month's: another month starts again from BILLSLEUTH_MODEL_BUDGET.
    engine = create_engine(db_url)
    try:
        assert (await standing(engine, spend("1.00"))).limit == Decimal("5.000000")
        next_month = await standing(engine, spend("1.00"), month="2099-01")
        assert (next_month.limit, next_month.paused) == (Decimal("1.00"), False)
    finally:
        await engine.dispose()


async def test_no_budget_means_nothing_is_reserved_or_paused(db_url: str) -> None:
    sc = scenario(FAULTY)
    async with OpenAIStub(correct_model(sc["truth"]), usage=ONE_CALL) as stub:
        configuration = llm_configuration(stub).model_copy(update={"spend": spend()})
        async with case_service(db_url, configuration, SETTINGS) as service:
            case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
    assert "investigator_note" not in case and case["model_cost"]["cost"] == "0.600000"
    counted = await rows(db_url, select(func.count()).select_from(schema.model_budget_months))
    assert counted[0][0] == 0


async def test_a_reservation_a_dead_process_left_behind_does_not_hold_the_budget_forever(db_url: str) -> None:
    sc = scenario(FAULTY)
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            for age in ("2 hours", "1 minute"):  # a crashed run's, and a live run's in another process
                await conn.execute(
                    text(
                        "INSERT INTO model_reservations (month, case_id, amount, at) "
                        "VALUES (:month, 'CASE-0999', 0.40, now() - CAST(:age AS interval))"
                    ),
                    {"month": month_of(), "age": age},
                )
    finally:
        await engine.dispose()
    assert (await budget_standing(db_url, spend("1.00"))).reserved == Decimal("0.40")
    async with (
        OpenAIStub(correct_model(sc["truth"]), usage=ONE_CALL) as stub,
        case_service(db_url, budgeted(stub), SETTINGS) as service,
    ):
        case = await service.open_case(sc["question"], requester="U0SUP", customer_id=sc["customer_id"])
    assert "investigator_note" not in case and len(stub.requests) == 3  # 0.40 of 1.00 held: room left
    left = await rows(db_url, select(schema.model_reservations.c.case_id))
    assert [r.case_id for r in left] == ["CASE-0999"]  # the live one stays; the dead one is gone


async def test_a_paused_month_holds_for_a_process_whose_environment_names_no_budget(db_url: str) -> None:
    """Model spend rules are policy (issue 25 item 6): the budget is the stored one, and a paused month is
    paused for every process — a `case open` whose shell has no BILLSLEUTH_MODEL_BUDGET included."""
    sc, month = scenario(FAULTY), month_of()
    policy = {
        "BILLSLEUTH_APPROVERS": "U0FIN1",
        "BILLSLEUTH_MODEL_BUDGET": "1.00",
        "BILLSLEUTH_MODEL_PRICES": '{"stub-model": {"input": 100, "output": 1000}}',
    }
    assert (await asyncio.to_thread(billsleuth, db_url, "policy", "apply", **policy)).returncode == 0
    await spend_already(db_url, "1.00")
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:  # what the call that reached the limit left behind
            await conn.execute(
                text("INSERT INTO model_budget_months (month, paused_at) VALUES (:month, now())"),
                {"month": month},
            )
    finally:
        await engine.dispose()
    async with OpenAIStub([call("list_invoices")] * 3, usage=ONE_CALL) as stub:
        no_budget = {
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": stub.base_url,
            "BILLSLEUTH_MODEL": "stub-model",
            "BILLSLEUTH_INVESTIGATOR": "llm",
            "BILLSLEUTH_APPROVERS": "U0FIN1",
        }
        opened = await asyncio.to_thread(
            billsleuth, db_url, "case", "open", sc["customer_id"], sc["question"], "--as", "U0SUP", "--json",
            **no_budget,
        )  # fmt: skip
        assert opened.returncode == 0, opened.stderr
        assert stub.requests == []  # the model was not asked
    case = json.loads(opened.stdout)
    assert (
        case["investigator_note"]
        == f"Investigated by the offline auditor: the model budget for {month} is spent"
    )
    assert "BILLSLEUTH_MODEL_BUDGET is 1 in the database, (empty) here" in opened.stderr
