"""The investigation graph end to end on the seeded ledger (offline investigator), with approvals."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text

from agent.cases.service import BOT_START, CaseService, case_service
from agent.graph.configuration import Configuration
from agent.graph.prompts import rejected_reply
from approvals.config import ApprovalSettings
from approvals.models import ApprovalRefused
from engine import schema
from tests.cli import billsleuth
from tests.os_accounts import OsAccount, run_cli

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios" / "default"
FINANCE = ("U0FIN0001", "U0FIN0002", "U0FIN0003")
SUPPORT = "U0SUPPORT1"
BILLSLEUTH = Path(sys.executable).with_name("billsleuth")


def scenario(variant: str, *, nth: int = 0) -> dict:
    found = [
        json.loads(p.read_text())
        for p in sorted(SCENARIOS.glob("S*.json"))
        if json.loads(p.read_text())["truth"]["variant"] == variant
    ]
    return found[nth]


def settings(threshold: str = "300.00", limit: str = "5000.00") -> ApprovalSettings:
    return ApprovalSettings(approvers=frozenset(FINANCE), two_person_threshold=Decimal(threshold),
                            daily_credit_limit=Decimal(limit))  # fmt: skip


async def count(service: CaseService, table: object, *where: object) -> int:
    async with service.engine.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(table).where(*where))).scalar_one()


@pytest.fixture
async def service(seeded_db_url: str):
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        yield svc


async def test_overcharge_pauses_with_one_draft_for_the_verified_amount(service: CaseService) -> None:
    sc = scenario("cancel_not_respected")
    service_case = await service.open_case(
        sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"]
    )
    case = await service.show_case(service_case["case_id"])
    truth = sc["truth"]
    assert case["status"] == "awaiting_approval"
    assert case["findings"]["root_cause"] == truth["root_cause"]
    assert case["credit_note"]["invoice_id"] == truth["invoice_ids"][0]
    assert case["credit_note"]["amount"] == truth["overcharge"]
    assert case["credit_note"]["status"] == "draft"
    assert truth["overcharge"] in case["reply"]["customer_message"]
    assert "[E" in case["reply"]["internal_note"]
    assert await count(service, schema.credit_notes) == 1
    state = await service.state_of(case["case_id"])
    assert state.next == ("await_approval",)
    assert type(state.values["status"]) is str  # a plain string: the checkpointer knows no enum of ours
    trail = await count(service, schema.audit_log, schema.audit_log.c.case_id == case["case_id"])
    assert trail >= 5


async def test_benign_case_is_explained_without_a_draft(service: CaseService) -> None:
    sc = scenario("tax_line")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert case["status"] == "explained"
    assert case["findings"]["expected_action"] == "explain_only"
    assert case["credit_note"] is None
    assert await count(service, schema.credit_notes) == 0


async def test_unknown_customer_is_asked_for(service: CaseService) -> None:
    case = await service.open_case("why did you charge me 99.00 in May?", requester="U0SUPPORT1")
    assert case["status"] == "needs_customer"
    assert "customer id" in case["reply"]["internal_note"]


async def test_chinese_complaint_gets_a_chinese_reply(service: CaseService) -> None:
    sc = next(
        json.loads(p.read_text())
        for p in sorted(SCENARIOS.glob("S*.json"))
        if any("\u4e00" <= ch <= "\u9fff" for ch in json.loads(p.read_text())["question"])
    )
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert any("\u4e00" <= ch <= "\u9fff" for ch in case["reply"]["customer_message"])


async def test_approve_issues_once_and_adds_the_amount_to_the_reply(service: CaseService) -> None:
    sc = scenario("duplicate_charge")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    note_id = case["credit_note"]["id"]
    outcome, after = await service.decide(note_id, approver=FINANCE[0], decision="approve")
    assert outcome.changed and after["status"] == "issued"
    assert after["credit_note"]["status"] == "issued"
    assert sc["truth"]["overcharge"] in after["reply"]["customer_message"].split("\n\n")[-1]
    again, same = await service.decide(note_id, approver=FINANCE[0], decision="approve")
    assert not again.changed and same["status"] == "issued"
    issued = schema.credit_notes.c.status == "issued"
    assert await count(service, schema.credit_notes, issued) == 1
    assert (await service.state_of(case["case_id"])).next == ()


async def test_reject_rewrites_the_reply_without_amount_or_promise(service: CaseService) -> None:
    sc = scenario("wrong_plan_price")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    note_id = case["credit_note"]["id"]
    _, after = await service.decide(
        note_id, approver=FINANCE[1], decision="reject", comment="price was agreed"
    )
    assert after["status"] == "rejected"
    message = after["reply"]["customer_message"]
    assert sc["truth"]["overcharge"] not in message
    assert "refund" not in message.lower() and "credit" not in message.lower() and "退" not in message
    with pytest.raises(ApprovalRefused):
        await service.decide(note_id, approver=FINANCE[0], decision="approve")


async def test_two_person_rule_waits_for_a_second_approver(seeded_db_url: str) -> None:
    async with case_service(
        seeded_db_url, Configuration(investigator="offline"), settings("10.00")
    ) as service:
        sc = scenario("duplicate_invoice")
        case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
        note_id = case["credit_note"]["id"]
        assert case["credit_note"]["needed"] == 2
        first, mid = await service.decide(note_id, approver=FINANCE[0], decision="approve")
        assert first.changed and first.status == "draft"
        assert mid["status"] == "awaiting_approval" and mid["credit_note"]["approvals"] == 1
        with pytest.raises(ApprovalRefused) as same_person:
            await service.decide(note_id, approver=FINANCE[0], decision="approve")
        assert same_person.value.rule == "one_vote_each"
        _, done = await service.decide(note_id, approver=FINANCE[1], decision="approve")
        assert done["status"] == "issued"


async def test_requester_and_strangers_cannot_approve(service: CaseService) -> None:
    sc = scenario("coupon_not_applied")
    case = await service.open_case(sc["question"], requester=FINANCE[2], customer_id=sc["customer_id"])
    note_id = case["credit_note"]["id"]
    with pytest.raises(ApprovalRefused) as own:
        await service.decide(note_id, approver=FINANCE[2], decision="approve")
    assert own.value.rule == "requester_cannot_approve"
    with pytest.raises(ApprovalRefused) as stranger:
        await service.decide(note_id, approver="U0NOBODY1", decision="approve")
    assert stranger.value.rule == "not_an_approver"
    assert (await service.show_case(case["case_id"]))["status"] == "awaiting_approval"


async def test_concurrent_clicks_give_exactly_one_outcome(service: CaseService) -> None:
    sc = scenario("expired_tax_rate")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    note_id = case["credit_note"]["id"]
    results = await asyncio.gather(
        service.decide(note_id, approver=FINANCE[0], decision="approve"),
        service.decide(note_id, approver=FINANCE[1], decision="approve"),
        service.decide(note_id, approver=FINANCE[2], decision="reject", comment="not sure"),
        return_exceptions=True,
    )
    changed = [r for r in results if not isinstance(r, BaseException) and r[0].changed]
    assert len(changed) == 1
    final = await service.show_case(case["case_id"])
    assert final["status"] in ("issued", "rejected")
    assert (
        await count(service, schema.credit_notes, schema.credit_notes.c.status.in_(["issued", "rejected"]))
        == 1
    )


async def test_an_approval_past_the_daily_limit_holds_the_note_until_the_limit_has_room(
    seeded_db_url: str,
) -> None:
    earlier, held_back = scenario("timezone_change_date"), scenario("cancel_not_respected")  # 26.02, 174.90
    offline = Configuration(investigator="offline")
    hard_stops = schema.activity_log.c.action == "budget.hard_stop"
    async with case_service(seeded_db_url, offline, settings(limit="190.00")) as tight:
        first = await open_and_approve(tight, earlier)
        assert first["status"] == "issued"  # 26.02 of today's 190.00
        case = await open_and_approve(tight, held_back)  # 26.02 + 174.90 > 190.00, but 174.90 fits a day
        # Held, not escalated: the approval stands and the case keeps waiting for room in the budget.
        assert case["status"] == "awaiting_approval" and case["escalation_reason"] is None
        assert case["credit_note"]["status"] == "approved"
        assert (await tight.state_of(case["case_id"])).next == ("await_approval",)
        assert await count(tight, schema.activity_log, hard_stops) == 1
        assert await tight.settle_waiting_cases() == []  # still no room: left waiting, nothing recorded
        assert await tight.expire_overdue() == []  # and only the bot's sweep may release it
        assert await count(tight, schema.activity_log, hard_stops) == 1
    async with case_service(seeded_db_url, offline, settings(limit="5000.00")) as raised:
        assert await raised.expire_overdue() == []
        assert (await raised.show_case(case["case_id"]))["status"] == "awaiting_approval"
        assert (await raised.sweep()).settled == [case["case_id"]]
        final = await raised.show_case(case["case_id"])
        assert final["status"] == "issued" and final["credit_note"]["status"] == "issued"
        assert final["credit_note"]["id"] in final["reply"]["customer_message"]
        assert await raised.settle_waiting_cases() == []  # settled once


async def test_a_note_larger_than_a_whole_days_limit_escalates_instead_of_waiting_forever(
    seeded_db_url: str,
) -> None:
    sc = scenario("cancel_not_respected")  # 174.90
    offline = Configuration(investigator="offline")
    async with case_service(seeded_db_url, offline, settings(limit="100.00")) as service:
        case = await open_and_approve(service, sc)
    assert case["status"] == "escalated"
    assert "daily_credit_limit" in case["escalation_reason"]


async def test_a_held_note_can_be_cancelled_and_the_reply_promises_nothing(seeded_db_url: str) -> None:
    sc = scenario("cancel_not_respected")  # 174.90
    async with case_service(
        seeded_db_url, Configuration(investigator="offline"), settings(limit="100.00")
    ) as svc:
        held = await open_and_approve(svc, sc)  # 174.90 never fits a 100.00 day: escalated, note approved
        assert held["status"] == "escalated" and held["credit_note"]["status"] == "approved"
        outcome, case = await svc.cancel(
            held["credit_note"]["id"], approver=FINANCE[1], reason="paid by hand"
        )
    assert outcome.status == "cancelled"
    assert case["status"] == "cancelled" and case["credit_note"]["status"] == "cancelled"
    assert sc["truth"]["overcharge"] not in case["reply"]["customer_message"]
    invoice = [held["credit_note"]["invoice_id"]]
    assert case["reply"]["customer_message"] in {rejected_reply("en", invoice), rejected_reply("zh", invoice)}
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        again = await svc.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert again["status"] == "awaiting_approval"  # the invoice is free for a new case


async def test_the_sweep_cancels_a_note_held_longer_than_the_hold_limit(seeded_db_url: str) -> None:
    earlier, held_back = scenario("timezone_change_date"), scenario("cancel_not_respected")  # 26.02, 174.90
    offline = Configuration(investigator="offline")
    async with case_service(seeded_db_url, offline, settings(limit="190.00")) as tight:
        await open_and_approve(tight, earlier)
        case = await open_and_approve(tight, held_back)
        assert case["status"] == "awaiting_approval" and case["credit_note"]["status"] == "approved"
        assert (await tight.sweep()).cancelled == []  # held, but not for long
        eight_days_on = datetime.now(UTC) + timedelta(days=8)
        swept = await tight.sweep(now=eight_days_on)
    assert swept.cancelled == [case["credit_note"]["id"]]
    assert swept.settled == [case["case_id"]]
    async with case_service(seeded_db_url, offline, settings()) as service:
        final = await service.show_case(case["case_id"])
        assert final["status"] == "cancelled" and final["credit_note"]["status"] == "cancelled"
        assert held_back["truth"]["overcharge"] not in final["reply"]["customer_message"]
        rows = await count(
            service,
            schema.activity_log,
            schema.activity_log.c.action == "credit_note.cancelled",
            schema.activity_log.c.actor_type == "system",
        )
        assert rows == 1


async def test_the_sweep_issues_a_held_note_by_the_stored_policy_not_the_one_it_started_with(
    seeded_db_url: str,
) -> None:
    earlier, held_back = scenario("timezone_change_date"), scenario("cancel_not_respected")  # 26.02, 174.90
    offline = Configuration(investigator="offline")
    async with case_service(seeded_db_url, offline, settings(limit="190.00"), policy=BOT_START) as bot:
        first = await open_and_approve(bot, earlier)
        case = await open_and_approve(bot, held_back)  # 26.02 + 174.90 > 190.00: held
        assert case["status"] == "awaiting_approval" and case["credit_note"]["status"] == "approved"
        # Another process lowers the daily limit (a narrowing applies at once) ...
        async with case_service(seeded_db_url, offline, settings(limit="100.00"), policy=BOT_START):
            pass
        # ... and the UTC day turns over: under the 190.00 this bot started with there is room again.
        async with bot.engine.begin() as conn:
            await conn.execute(
                schema.credit_notes.update()
                .where(schema.credit_notes.c.id == first["credit_note"]["id"])
                .values(issued_at=schema.credit_notes.c.issued_at - timedelta(days=1))
            )
        await bot.sweep()
        final = await bot.show_case(case["case_id"])
    # 174.90 does not fit a day under the stored 100.00: it must not leave.
    assert final["credit_note"]["status"] == "approved"
    assert final["status"] == "escalated" and "daily_credit_limit" in final["escalation_reason"]


async def test_the_sweep_ends_a_note_refused_at_issue_after_the_hold_limit_like_a_held_one(
    seeded_db_url: str,
) -> None:
    sc = scenario("cancel_not_respected")  # 174.90: never fits a 100.00 day, so issuing it is refused
    offline = Configuration(investigator="offline")
    async with case_service(seeded_db_url, offline, settings(limit="100.00")) as svc:
        case = await open_and_approve(svc, sc)
        assert case["status"] == "escalated" and case["credit_note"]["status"] == "approved"
        assert (await svc.sweep()).cancelled == []  # refused, but not long ago
        swept = await svc.sweep(now=datetime.now(UTC) + timedelta(days=8))
        final = await svc.show_case(case["case_id"])
    assert swept.cancelled == [case["credit_note"]["id"]]
    assert swept.settled == [case["case_id"]]  # the bot redraws its card and posts the reply
    assert final["status"] == "cancelled" and final["credit_note"]["status"] == "cancelled"
    assert sc["truth"]["overcharge"] not in final["reply"]["customer_message"]


async def open_and_approve(service: CaseService, sc: dict[str, Any]) -> dict[str, Any]:
    opened = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    _, case = await service.decide(opened["credit_note"]["id"], approver=FINANCE[0], decision="approve")
    return case


async def test_crash_between_draft_and_pause_recovers_without_a_second_draft(service: CaseService) -> None:
    sc = scenario("timezone_change_date")

    def crash_after_drafting(event: dict) -> None:
        if event.get("type") == "credit_note":
            raise RuntimeError("simulated crash right after the draft was written")

    with pytest.raises(RuntimeError):
        await service.open_case(
            sc["question"],
            requester="U0SUPPORT1",
            customer_id=sc["customer_id"],
            on_progress=crash_after_drafting,
        )
    assert await count(service, schema.credit_notes) == 1
    recovered = await service.recover()
    assert len(recovered) == 1
    case = await service.show_case(recovered[0])
    assert case["status"] == "awaiting_approval"
    assert await count(service, schema.credit_notes) == 1
    assert (await service.state_of(case["case_id"])).next == ("await_approval",)


async def test_recovery_leaves_alone_a_case_another_process_is_running(service: CaseService) -> None:
    sc = scenario("wrong_plan_price")
    case_id = await service.new_case_id()
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.cases.insert().values(
                id=case_id, customer_id=sc["customer_id"], question=sc["question"], requester="U0SUPPORT1",
                status="investigating",
            )
        )  # fmt: skip
    async with service.engine.connect() as other_process:
        lock = text("SELECT pg_advisory_lock(hashtext(:key))")
        await other_process.execute(lock, {"key": f"case:{case_id}"})
        assert await service.recover() == []  # someone is investigating it: not run a second time
        await other_process.execute(text("SELECT pg_advisory_unlock_all()"))
        await other_process.commit()
    assert await service.recover() == [case_id]
    assert (await service.show_case(case_id))["status"] == "awaiting_approval"


async def test_a_second_case_on_the_same_overcharge_cannot_credit_it_twice(service: CaseService) -> None:
    sc = scenario("duplicate_charge")
    first = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    second = await service.open_case(sc["question"], requester="U0SUPPORT2", customer_id=sc["customer_id"])
    assert first["status"] == "awaiting_approval"
    assert second["status"] == "escalated" and "open_note_on_invoice" in second["escalation_reason"]
    assert second["findings"]["overcharge"] == sc["truth"]["overcharge"]  # verified, but not drafted again
    assert await count(service, schema.credit_notes) == 1
    await service.decide(first["credit_note"]["id"], approver=FINANCE[0], decision="approve")
    third = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert third["status"] == "explained"  # the issued credit note settled it: nothing is owed any more
    assert await count(service, schema.credit_notes) == 1


def crash_at(step: str) -> Any:
    """A progress callback that stops the run as `step` starts: what a killed process leaves behind."""

    def crash(event: dict) -> None:
        if event.get("type") == "step" and event.get("step") == step:
            raise RuntimeError(f"simulated crash as {step} starts")

    return crash


async def test_a_note_issued_between_verify_and_draft_is_not_credited_again(service: CaseService) -> None:
    """A double charge is paid twice over, so "credited + this ≤ paid" would let a second case credit it
    again: drafting re-derives what is still owed from the ledger, under the invoice lock."""
    sc = scenario("duplicate_charge")
    first = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    with pytest.raises(RuntimeError):  # verified the same overcharge, stopped before drafting
        await service.open_case(
            sc["question"],
            requester="U0SUPPORT2",
            customer_id=sc["customer_id"],
            on_progress=crash_at("request_approval"),
        )
    _, issued = await service.decide(first["credit_note"]["id"], approver=FINANCE[0], decision="approve")
    assert issued["status"] == "issued"
    [second_id] = await service.recover()
    second = await service.show_case(second_id)
    assert second["status"] == "escalated"
    assert "overcharge_changed" in second["escalation_reason"]
    assert "0.00 is still owed back" in second["escalation_reason"]
    assert second["credit_note"] is None
    assert await count(service, schema.credit_notes) == 1


async def test_an_undecided_draft_expires_and_the_reply_promises_nothing(service: CaseService) -> None:
    sc = scenario("coupon_wrong_base")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert await service.expire_overdue() == []  # not overdue yet
    later = datetime.now(UTC) + timedelta(hours=73)
    assert await service.expire_overdue(now=later) == [case["credit_note"]["id"]]
    after = await service.show_case(case["case_id"])
    assert after["status"] == "expired" and after["credit_note"]["status"] == "expired"
    assert sc["truth"]["overcharge"] not in after["reply"]["customer_message"]
    assert (await service.state_of(case["case_id"])).next == ()


async def test_looking_for_settled_waiting_cases_reads_once_however_many_wait_on_a_draft(
    service: CaseService,
) -> None:
    """The bot's sweep looks every few minutes: one statement, not two more for each case still waiting."""
    waiting = []
    for variant in ("coupon_wrong_base", "expired_tax_rate", "coupon_not_applied"):
        sc = scenario(variant)
        case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
        waiting.append(case["case_id"])
    statements: list[str] = []

    def counted(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    event.listen(service.engine.sync_engine, "before_cursor_execute", counted)
    try:
        assert await service.settle_waiting_cases() == []  # every note is still a draft
    finally:
        event.remove(service.engine.sync_engine, "before_cursor_execute", counted)
    assert len(statements) == 1, statements
    # A note decided meanwhile (here, expired behind the service's back) is still found and settled.
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.credit_notes.update()
            .where(schema.credit_notes.c.case_id == waiting[1])
            .values(status="expired")
        )
    assert await service.settle_waiting_cases() == [waiting[1]]
    assert (await service.show_case(waiting[1]))["status"] == "expired"


async def test_finished_cases_lose_their_checkpoints_after_the_retention(service: CaseService) -> None:
    explained = await service.open_case(
        scenario("tax_line")["question"],
        requester="U0SUPPORT1",
        customer_id=scenario("tax_line")["customer_id"],
    )
    waiting = scenario("wrong_tax_region")
    paused = await service.open_case(
        waiting["question"], requester="U0SUPPORT1", customer_id=waiting["customer_id"]
    )
    assert await service.prune_finished() == []  # finished just now: kept
    assert await service.prune_finished(older_than=timedelta(0)) == [explained["case_id"]]
    assert not (await service.state_of(explained["case_id"])).values
    assert (await service.show_case(explained["case_id"]))["status"] == "explained"  # the summary stays
    assert (await service.state_of(paused["case_id"])).next == ("await_approval",)  # waiting: untouched


async def test_a_vote_that_finds_the_draft_overdue_expires_the_case_too(service: CaseService) -> None:
    sc = scenario("proration_wrong_days")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.credit_notes.update().values(expires_at=datetime.now(UTC) - timedelta(minutes=1))
        )
    with pytest.raises(ApprovalRefused) as late:
        await service.decide(case["credit_note"]["id"], approver=FINANCE[0], decision="approve")
    assert late.value.rule == "expired"
    after = await service.show_case(case["case_id"])
    assert after["status"] == "expired"
    assert sc["truth"]["overcharge"] not in after["reply"]["customer_message"]


def cli(*args: str, env: dict[str, str], account: OsAccount | None = None) -> Any:
    """In this process as this test's OS account; in a process of its own as another `account`."""
    if account is not None:
        return run_cli(env, *args, account=account)
    return billsleuth(*args, env=env)


def test_case_opened_in_one_process_is_approved_from_another(
    seeded_db_url: str, second_os_account: OsAccount, third_os_account: OsAccount
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    # The break-glass door open in the stored policy; the case opened by this test's OS account, decided by
    # two others (one OS account counts once on a note, whatever --as says).
    env.update(
        DATABASE_URL=seeded_db_url, BILLSLEUTH_APPROVERS=",".join(FINANCE), BILLSLEUTH_CLI_DECISIONS="on"
    )
    sc = scenario("proration_missing_credit")
    # The opening command in a process of its own: nothing but the database carries the case over.
    opened = run_cli(env, "case", "open", sc["customer_id"], sc["question"], "--as", SUPPORT, "--json")
    assert opened.returncode == 0, opened.stderr
    case = json.loads(opened.stdout)
    assert case["status"] == "awaiting_approval"
    note_id = case["credit_note"]["id"]
    second, third = second_os_account, third_os_account
    listed = json.loads(cli("list", "--json", env=env, account=second).stdout)
    assert [n["id"] for n in listed["credit_notes"]] == [note_id]
    shown = json.loads(cli("show", note_id, "--json", env=env, account=second).stdout)
    assert shown["recompute"]["overcharge"] == sc["truth"]["overcharge"]
    assert any(call["actor"] == "agent:offline" for call in shown["tool_trail"])
    missing_reason = cli("reject", note_id, "--as", FINANCE[0], env=env, account=second)
    assert missing_reason.returncode != 0 and "reason" in missing_reason.stderr
    assert len(missing_reason.stderr.strip().splitlines()) == 1
    assert case["credit_note"]["needed"] == 2  # 321.36 is above the 300.00 threshold
    first = cli("approve", note_id, "--as", FINANCE[0], "--json", env=env, account=second)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["credit_note"]["approvals"] == 1
    twice = cli("approve", note_id, "--as", FINANCE[0], env=env, account=third)
    assert twice.returncode != 0 and "one_vote_each" in twice.stderr
    approved = cli("approve", note_id, "--as", FINANCE[1], "--json", env=env, account=third)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["status"] == "issued"
    repeat = cli("approve", note_id, "--as", FINANCE[2], env=env, account=second)
    assert repeat.returncode == 0 and "already" in repeat.stdout.lower()
    conflict = cli("reject", note_id, "--as", FINANCE[1], "-m", "changed my mind", env=env, account=third)
    assert conflict.returncode != 0
    shown_case = json.loads(cli("case", "show", case["case_id"], "--json", env=env).stdout)
    assert shown_case["status"] == "issued"
    unknown = cli("show", "CN-9999", env=env)
    assert unknown.returncode == 2 and "CN-9999" in unknown.stderr


def test_an_approved_note_held_by_the_daily_limit_is_cancelled_from_the_cli(
    seeded_db_url: str, second_os_account: OsAccount
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    # The break-glass door open in the stored policy; cases opened by this test's OS account (the support
    # desk), decided by another (finance).
    env.update(
        DATABASE_URL=seeded_db_url,
        BILLSLEUTH_APPROVERS=",".join(FINANCE),
        BILLSLEUTH_DAILY_CREDIT_LIMIT="190.00",
        BILLSLEUTH_CLI_DECISIONS="on",
    )
    finance = second_os_account
    for sc in (scenario("timezone_change_date"), scenario("cancel_not_respected")):  # 26.02, then 174.90
        opened_ = cli("case", "open", sc["customer_id"], sc["question"], "--as", SUPPORT, "--json", env=env)
        opened = json.loads(opened_.stdout)
        approved = cli(
            "approve", opened["credit_note"]["id"], "--as", FINANCE[0], "--json", env=env, account=finance
        )
        assert approved.returncode == 0, approved.stderr
    held = json.loads(approved.stdout)  # 26.02 + 174.90 passes today's 190.00: approved and held
    assert held["status"] == "awaiting_approval" and held["credit_note"]["status"] == "approved"
    note_id = held["credit_note"]["id"]

    no_reason = cli("cancel", note_id, "--as", FINANCE[1], env=env, account=finance)
    assert no_reason.returncode != 0 and "reason_required" in no_reason.stderr
    assert len(no_reason.stderr.strip().splitlines()) == 1
    stranger = cli("cancel", note_id, "--as", "U0SALES001", "-m", "not needed", env=env, account=finance)
    assert stranger.returncode != 0 and "not_an_approver" in stranger.stderr
    cancelled = cli(
        "cancel", note_id, "--as", FINANCE[0], "-m", "paid by hand", "--json", env=env, account=finance
    )
    assert cancelled.returncode == 0, cancelled.stderr  # the approver who voted may cancel too
    case = json.loads(cancelled.stdout)
    assert case["status"] == "cancelled" and case["credit_note"]["status"] == "cancelled"
    assert scenario("cancel_not_respected")["truth"]["overcharge"] not in case["reply"]["customer_message"]
    repeat = cli("cancel", note_id, "--as", FINANCE[1], "-m", "paid by hand", env=env, account=finance)
    assert repeat.returncode == 0 and "already cancelled" in repeat.stdout
    conflict = cli("reject", note_id, "--as", FINANCE[1], "-m", "changed my mind", env=env, account=finance)
    assert conflict.returncode != 0 and "conflict" in conflict.stderr
    shown = json.loads(cli("case", "show", case["case_id"], "--json", env=env).stdout)
    assert shown == case


async def test_a_cli_cancel_is_refused_while_the_cli_door_is_shut(seeded_db_url: str) -> None:
    offline = Configuration(investigator="offline")
    async with case_service(seeded_db_url, offline, settings(limit="100.00")) as service:
        held = await open_and_approve(service, scenario("cancel_not_respected"))  # refused at issue
    assert held["credit_note"]["status"] == "approved"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    env.update(DATABASE_URL=seeded_db_url, BILLSLEUTH_APPROVERS=",".join(FINANCE))
    refused = cli("cancel", held["credit_note"]["id"], "--as", FINANCE[1], "-m", "paid by hand", env=env)
    assert refused.returncode != 0 and "cli_decisions_off" in refused.stderr
    async with case_service(seeded_db_url, offline, settings()) as service:
        assert (await service.show_case(held["case_id"]))["credit_note"]["status"] == "approved"


async def test_a_stop_between_the_last_checkpoint_and_the_case_row_is_caught_up_by_recovery(
    service: CaseService,
) -> None:
    """Killed after the resumed graph checkpointed its end (the note issued) but before the cases row was
    written: the row still says awaiting_approval. Recovery copies the graph's end into it."""
    sc = scenario("cancel_not_respected")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    await service.decide(case["credit_note"]["id"], approver=FINANCE[0], decision="approve")
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.cases.update()
            .where(schema.cases.c.id == case["case_id"])
            .values(status="awaiting_approval")
        )
    assert case["case_id"] in await service.recover()
    caught_up = await service.show_case(case["case_id"])
    assert caught_up["status"] == "issued" and caught_up["credit_note"]["status"] == "issued"
