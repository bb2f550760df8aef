"""Settling the whole account: the case credits the invoice the complaint is about and lists the other
overpaid invoices, each recomputed on the record; the reply names them once verified; a linked case never
drafts a second note on an invoice an open note already credits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy import select

from agent.cases.intake import parse_complaint
from agent.cases.service import CaseService, case_service
from agent.graph.configuration import Configuration
from agent.graph.prompts import Language, linked_case_question
from agent.language import LANGUAGES
from engine import schema
from tests.test_cases import scenario, settings
from tests.two_faults import TwoFaults, two_fault_account


@pytest.fixture
async def service(seeded_db_url: str) -> AsyncIterator[CaseService]:
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        yield svc


async def recomputed(service: CaseService, case_id: str, actor: str) -> list[str]:
    log = schema.audit_log.c
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            select(log.args).where(
                log.case_id == case_id, log.tool == "recompute_invoice", log.actor == actor, log.ok
            )
        )
        return [r.args["invoice_id"] for r in rows]


async def test_a_two_fault_account_credits_the_asked_invoice_and_lists_the_other(
    service: CaseService,
) -> None:
    account = await two_fault_account(service.engine)
    case = await service.open_case(account.question, requester="U0SUPPORT1", customer_id=account.customer_id)
    assert case["status"] == "awaiting_approval"
    assert case["credit_note"]["invoice_id"] == account.asked_invoice
    assert case["credit_note"]["amount"] == account.asked_overcharge
    assert case["other_findings"] == [
        {
            "invoice_id": account.other_invoice,
            "root_cause": "duplicate_charge",
            "overcharge": account.other_overcharge,
        }
    ]
    assert (await service.show_case(case["case_id"]))["other_findings"] == case["other_findings"]
    # Verified on the record: the other invoice was recomputed through the audited tool.
    assert account.other_invoice in await recomputed(service, case["case_id"], "system:verify")
    message = case["reply"]["customer_message"]
    assert f"We also found overcharges on {account.other_invoice} ({account.other_overcharge})" in message
    assert account.other_invoice in case["reply"]["internal_note"]


async def test_a_single_fault_account_lists_no_other_findings(service: CaseService) -> None:
    sc = scenario("wrong_plan_price")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert case["status"] == "awaiting_approval"
    assert case["other_findings"] == []
    assert "also found" not in case["reply"]["customer_message"]


async def test_an_explained_case_lists_no_other_findings(service: CaseService) -> None:
    sc = scenario("tax_line")
    case = await service.open_case(sc["question"], requester="U0SUPPORT1", customer_id=sc["customer_id"])
    assert (case["status"], case["other_findings"]) == ("explained", [])


async def test_the_reply_names_the_other_overcharges_in_the_customers_language(service: CaseService) -> None:
    account = await two_fault_account(service.engine, "S034")  # a complaint written in Chinese
    case = await service.open_case(account.question, requester="U0SUPPORT1", customer_id=account.customer_id)
    assert [o["invoice_id"] for o in case["other_findings"]] == [account.other_invoice]
    assert (
        f"我们还发现发票 {account.other_invoice}({account.other_overcharge} 美元)有多收"
        in (case["reply"]["customer_message"])
    )


async def test_an_other_finding_the_ledger_no_longer_supports_is_not_listed(service: CaseService) -> None:
    """Credited in full since the audit looked: the recomputation finds nothing owed, so it is dropped."""
    account = await two_fault_account(service.engine)
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.credit_notes.insert().values(
                id="CN-9001", invoice_id=account.other_invoice, amount=account.other_overcharge,
                reason="credited by hand", status="issued",
            )
        )  # fmt: skip
    case = await service.open_case(account.question, requester="U0SUPPORT1", customer_id=account.customer_id)
    assert case["other_findings"] == []


async def test_a_linked_case_for_an_invoice_an_open_note_credits_escalates(service: CaseService) -> None:
    """Someone asked about the other invoice directly first: its note is open, so the linked case opened
    from the first case's card escalates (open_note_on_invoice) instead of drafting a second note."""
    account: TwoFaults = await two_fault_account(service.engine)
    direct = await service.open_case(
        f"{account.other_invoice} was charged twice", requester="U0SUPPORT2", customer_id=account.customer_id
    )
    assert direct["credit_note"]["invoice_id"] == account.other_invoice
    first = await service.open_case(account.question, requester="U0SUPPORT1", customer_id=account.customer_id)
    [other] = first["other_findings"]
    question = linked_case_question(
        "en", first["case_id"], other["invoice_id"], other["overcharge"], other["root_cause"]
    )
    linked = await service.open_case(question, requester="U0SUPPORT1", customer_id=account.customer_id)
    assert linked["status"] == "escalated"
    assert "open_note_on_invoice" in linked["escalation_reason"]
    assert linked["credit_note"] is None


async def test_the_llm_path_lists_the_other_findings_from_the_auditor(
    service: CaseService, seeded_db_url: str
) -> None:
    """The model submits only the asked invoice; the other finding still comes from the auditor (code),
    recomputed by verify on the record."""
    from tests.openai_stub import OpenAIStub
    from tests.test_llm import SETTINGS, correct_model, llm_configuration

    account = await two_fault_account(service.engine)
    truth = {"root_cause": "wrong_plan_price", "invoice_ids": [account.asked_invoice]}
    async with (
        OpenAIStub(correct_model(truth)) as stub,
        case_service(seeded_db_url, llm_configuration(stub), SETTINGS) as llm_service,
    ):
        case = await llm_service.open_case(
            account.question, requester="U0SUPPORT1", customer_id=account.customer_id
        )
    assert case["status"] == "awaiting_approval", case["escalation_reason"]
    assert case["credit_note"]["invoice_id"] == account.asked_invoice
    assert [o["invoice_id"] for o in case["other_findings"]] == [account.other_invoice]
    assert account.other_invoice in await recomputed(service, case["case_id"], "system:verify")


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_linked_cases_question_names_its_invoice_in_the_customers_language(language: Language) -> None:
    question = linked_case_question(language, "CASE-0003", "INV-0007-05", "26.02", "duplicate_charge")
    complaint = parse_complaint(question, invoice_ids=["INV-0007-04", "INV-0007-05"])
    assert (complaint.invoice_id, complaint.amount, complaint.language) == (
        "INV-0007-05",
        Decimal("26.02"),
        language,
    )
    assert complaint.customer_id is None and complaint.month is None
