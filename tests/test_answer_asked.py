"""Answering what the customer asked, end to end on the seeded ledger: a month or amount that is not where
the overcharge is, an amount nowhere on the account, the reply's language beside a quoted name, and the
CLI's own way of asking for a customer."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from agent.cases.service import CaseService, case_service
from agent.graph.configuration import Configuration
from agent.graph.grounding import ungrounded
from agent.graph.prompts import month_of
from engine import schema
from engine.money import fmt
from tests.cli import billsleuth
from tests.test_cases import scenario, settings
from tests.test_llm import correct_model, recomputed, submit
from tests.test_llm import open_case as open_llm_case


@pytest.fixture
async def service(seeded_db_url: str):
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        yield svc


async def invoices_of(service: CaseService, customer_id: str) -> list[Any]:
    inv = schema.invoices.c
    async with service.engine.connect() as conn:
        found = await conn.execute(
            select(inv.id, inv.issued_at, inv.total).where(inv.customer_id == customer_id).order_by(inv.id)
        )
        return list(found)


async def evidence_of(service: CaseService, case_id: str) -> list[Any]:
    return list((await service.state_of(case_id)).values["evidence"])


def month(language: str, invoice: Any) -> str:
    return month_of(language, invoice.issued_at.isoformat())  # type: ignore[arg-type]


async def test_a_correct_invoice_named_is_said_correct_and_the_overcharge_is_pointed_at(
    service: CaseService,
) -> None:
    sc = scenario("proration_missing_credit")
    target = sc["truth"]["invoice_ids"][0]
    invoices = await invoices_of(service, sc["customer_id"])
    named = next(i for i in invoices if i.id != target)
    over = next(i for i in invoices if i.id == target)
    words = f"Why was our {month('en', named).split()[0]} invoice of ${fmt(named.total)} so high?"
    case = await service.open_case(words, requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert case["status"] == "awaiting_approval" and case["credit_note"]["invoice_id"] == target
    reply = case["reply"]["customer_message"]
    assert reply.startswith(
        f"Hello, your {month('en', named)} invoice {named.id} ({fmt(named.total)}) was correct; "
        f"the overcharge is on your {month('en', over)} invoice {target}. We have checked invoice {target}."
    )
    assert ungrounded(reply, await evidence_of(service, case["case_id"])) == []


async def test_the_same_in_chinese(service: CaseService) -> None:
    sc = scenario("proration_missing_credit")
    target = sc["truth"]["invoice_ids"][0]
    invoices = await invoices_of(service, sc["customer_id"])
    named = next(i for i in invoices if i.id != target)
    words = f"为什么 {named.issued_at.month} 月收了我 {fmt(named.total)}?感觉不对。"
    case = await service.open_case(words, requester="U0SUPPORT1", customer_id=sc["customer_id"])
    reply = case["reply"]["customer_message"]
    assert f"{month('zh', named)}的发票 {named.id}({fmt(named.total)} 美元)是正确的;多收的费用在" in reply
    assert reply.startswith("您好,您问到的")


async def test_an_amount_nowhere_on_the_account_names_the_invoices_it_could_not_be_matched_to(
    service: CaseService,
) -> None:
    sc = scenario("proration_missing_credit")
    target = sc["truth"]["invoice_ids"][0]
    invoices = await invoices_of(service, sc["customer_id"])
    named = next(i for i in invoices if i.id != target)
    amount = Decimal("9999.99")
    assert all(i.total != amount for i in invoices)
    word = month("en", named).split()[0]
    case = await service.open_case(
        f"You charged us {fmt(amount)} in {word}!", requester="U0SUPPORT1", customer_id=sc["customer_id"]
    )
    assert case["status"] == "awaiting_approval" and case["credit_note"]["invoice_id"] == target
    same_month = [
        i
        for i in invoices
        if (i.issued_at.year, i.issued_at.month) == (named.issued_at.year, named.issued_at.month)
    ]
    assert len(same_month) == 1
    reply = case["reply"]["customer_message"]
    assert reply.startswith(
        f"Hello, we could not find a charge of {fmt(amount)} on your account; your invoice in "
        f"{month('en', named)} was {named.id} ({fmt(named.total)}). We have checked invoice {target}."
    ), reply
    evidence = await evidence_of(service, case["case_id"])
    assert ungrounded(reply, evidence) == []
    assert any(e["tool"] == "complaint" and e["value"] == fmt(amount) for e in evidence)


async def test_an_amount_nowhere_and_no_month_lists_the_latest_invoices(service: CaseService) -> None:
    sc = scenario("tax_line")
    invoices = await invoices_of(service, sc["customer_id"])
    case = await service.open_case(
        "Why did you take 9999.99 from us?", requester="U0SUPPORT1", customer_id=sc["customer_id"]
    )
    assert case["status"] == "explained"
    latest = sorted(invoices, key=lambda i: (i.issued_at, i.id))[-3:]
    listed = ", ".join(f"{i.id} ({fmt(i.total)})" for i in latest)
    assert (
        f"we could not find a charge of 9999.99 on your account; your latest invoices are {listed}."
        in (case["reply"]["customer_message"])
    )


async def test_the_invoice_named_is_the_overcharged_one_so_nothing_more_is_said(service: CaseService) -> None:
    sc = scenario("proration_missing_credit")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert case["reply"]["customer_message"].startswith("Hello, we have checked invoice")


async def test_an_english_message_quoting_a_chinese_name_is_answered_in_english(service: CaseService) -> None:
    customers = schema.customers.c
    async with service.engine.connect() as conn:
        cid, name = (
            await conn.execute(
                select(customers.id, customers.name).where(customers.country == "CN").order_by(customers.id)
            )
        ).first()
    assert not name.isascii()
    case = await service.open_case(f"{name}: billed twice?", requester="U0SUPPORT1", customer_id=cid)
    reply = case["reply"]["customer_message"]
    assert reply.startswith("Hello") and not any("\u4e00" <= ch <= "\u9fff" for ch in reply)


def test_the_cli_asks_for_an_id_on_its_own_command_line(seeded_db_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BILLSLEUTH_", "SLACK_"))}
    env.update(DATABASE_URL=seeded_db_url, BILLSLEUTH_INVESTIGATOR="offline")
    for words in ("why did you charge me 89.00 in May?", "为什么 5 月扣了我 89.00?"):
        opened = billsleuth("case", "open", "", words, "--as", "U0SUPPORT1", env=env)
        assert opened.returncode == 0, opened.stderr
        assert "needs_customer" in opened.stdout
        assert 'billsleuth case open C-0007 "…"' in opened.stdout
        assert "mention" not in opened.stdout.lower()


async def test_behind_a_model_the_reply_answers_the_wrong_month_too(seeded_db_url: str) -> None:
    """The model recomputes only the overcharged invoice and lists nothing: what the reply says about the
    month named is read onto the record by code, so it is grounded all the same."""
    sc = scenario("proration_missing_credit")
    target = sc["truth"]["invoice_ids"][0]
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as offline:
        invoices = await invoices_of(offline, sc["customer_id"])
    named = next(i for i in invoices if i.id != target)
    script = correct_model(sc["truth"])[1:]  # no overview: no list_invoices from the model
    words = f"Why was our {month('en', named).split()[0]} invoice so high?"
    case, _ = await open_llm_case(seeded_db_url, script, sc, question=words)
    assert case["status"] == "awaiting_approval", case["escalation_reason"]
    assert case["reply"]["customer_message"].startswith(
        f"Hello, your {month('en', named)} invoice {named.id} ({fmt(named.total)}) was correct; "
        f"the overcharge is on your"
    )


async def test_the_customers_own_amount_does_not_ground_the_models_words(seeded_db_url: str) -> None:
    """The amount the customer named is on the record only to be quoted back to them ("we could not find a
    charge of …"). The model's reasoning repeating it as a finding is not grounded by that: the approver
    reads the auditor's words instead."""
    sc = scenario("proration_missing_credit")
    target = sc["truth"]["invoice_ids"][0]
    claimed = Decimal("9999.99")

    def conclude(request: Any) -> Any:
        overcharge = recomputed(request, target)["overcharge"]
        return submit(
            root_cause=sc["truth"]["root_cause"],
            invoice_ids=[target],
            overcharge=overcharge,
            expected_action="credit_note",
            reasoning=f"{target} overcharged the customer {fmt(claimed)}, as they say.",
        )

    script = [*correct_model(sc["truth"])[:-1], conclude]
    words = f"You charged us {fmt(claimed)} and that is wrong!"
    case, _ = await open_llm_case(seeded_db_url, script, sc, question=words)
    assert case["status"] == "awaiting_approval", case["escalation_reason"]
    assert fmt(claimed) in case["reply"]["customer_message"]  # quoted back to the customer, as theirs
    assert fmt(claimed) not in case["findings"]["reasoning"]
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        state = (await svc.state_of(case["case_id"])).values
    assert state["findings"]["reasoning_by"] == "auditor"
