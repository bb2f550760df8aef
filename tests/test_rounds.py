"""Request changes: an approver sends a note back with a question; the requester's answer starts a new round
that drafts a new note (a new idempotency key) or explains; at most three rounds, then a person takes over.
Every round is in activity_log, and a round a stop interrupts is run again with the recorded answer."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from agent.cases.rounds import RESUBMITTED, NotWaitingForAnswer
from agent.cases.service import CaseService, case_service
from agent.graph.configuration import Configuration
from approvals.models import ApprovalRefused, Rule
from engine import schema
from tests.test_cases import FINANCE, scenario, settings

ALICE, BOB, _ = FINANCE
REQUESTER = "U0SUPPORT1"


@pytest.fixture
async def service(seeded_db_url: str):
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        yield svc


async def credit_case(service: CaseService) -> dict:
    sc = scenario("cancel_not_respected")
    case = await service.open_case(sc["question"], requester=REQUESTER, customer_id=sc["customer_id"])
    assert case["status"] == "awaiting_approval"
    return case


async def activity(service: CaseService, case_id: str) -> list[tuple[str, dict]]:
    log = schema.activity_log.c
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            select(log.action, log.details).where(log.entity_id == case_id).order_by(log.id)
        )
        return [(r.action, r.details) for r in rows]


async def test_changes_requested_then_answered_drafts_a_new_note(service: CaseService) -> None:
    case = await credit_case(service)
    first = case["credit_note"]
    reply_before = case["reply"]["customer_message"]

    _, sent_back = await service.request_changes(
        first["id"], approver=ALICE, question="Did they use the seats in March?", source="slack:T0"
    )
    assert sent_back["status"] == "revision_requested"
    assert sent_back["credit_note"]["status"] == "rejected"
    assert sent_back["reply"]["customer_message"] == reply_before  # nothing is said to the customer yet
    votes = schema.approvals.c
    async with service.engine.connect() as conn:
        (vote,) = (await conn.execute(select(votes.decision, votes.comment))).all()
    assert tuple(vote) == ("reject", "Did they use the seats in March?")

    again = await service.resubmit(
        case["case_id"], answer="No, the account was closed on 3 March.", by=REQUESTER
    )
    assert again["status"] == "awaiting_approval"
    second = again["credit_note"]
    assert second["id"] != first["id"] and second["status"] == "draft" and second["amount"] == first["amount"]
    keys = schema.credit_note_requests.c
    async with service.engine.connect() as conn:
        assert sorted((await conn.execute(select(keys.idempotency_key))).scalars())[-1].endswith(":r2")

    actions = [action for action, _ in await activity(service, case["case_id"])]
    assert "case.revision_requested" in actions and RESUBMITTED in actions
    asked = dict(await activity(service, case["case_id"]))["case.revision_requested"]
    assert asked["round"]["question"] == "Did they use the seats in March?"
    assert asked["round"]["asked_by"] == ALICE and asked["round"]["credit_note_id"] == first["id"]

    with pytest.raises(NotWaitingForAnswer):  # a second answer to the same question starts nothing
        await service.resubmit(case["case_id"], answer="again", by=REQUESTER)


async def test_request_changes_is_a_vote_under_every_rule(service: CaseService) -> None:
    case = await credit_case(service)
    with pytest.raises(ApprovalRefused) as refused:
        await service.request_changes(case["credit_note"]["id"], approver="U0SALES001", question="why?")
    assert refused.value.rule == Rule.NOT_AN_APPROVER
    assert (await service.show_case(case["case_id"]))["status"] == "awaiting_approval"


async def test_after_three_rounds_a_person_takes_over(service: CaseService) -> None:
    case = await credit_case(service)
    for round_ in (1, 2):
        note_id = (await service.show_case(case["case_id"]))["credit_note"]["id"]
        await service.request_changes(note_id, approver=BOB, question=f"question {round_}?")
        await service.resubmit(case["case_id"], answer=f"answer {round_}", by=REQUESTER)
    third = await service.show_case(case["case_id"])
    assert third["status"] == "awaiting_approval"
    _, ended = await service.request_changes(third["credit_note"]["id"], approver=BOB, question="question 3?")
    assert ended["status"] == "escalated" and "3 rounds" in ended["escalation_reason"]
    assert third["credit_note"]["amount"] not in ended["reply"]["customer_message"]  # no money promised
    with pytest.raises(NotWaitingForAnswer):
        await service.resubmit(case["case_id"], answer="answer 3", by=REQUESTER)


async def test_a_round_a_stop_interrupted_is_run_again_with_the_recorded_answer(service: CaseService) -> None:
    case = await credit_case(service)
    await service.request_changes(case["credit_note"]["id"], approver=ALICE, question="Which seats?")
    # The answer was recorded and the case taken up, then the process died before the round ran.
    cases = schema.cases.c
    async with service.engine.begin() as conn:
        await conn.execute(
            schema.cases.update().where(cases.id == case["case_id"]).values(status="investigating")
        )
        await conn.execute(
            schema.activity_log.insert().values(
                actor_type="user", actor_id=REQUESTER, action=RESUBMITTED, entity_type="case",
                entity_id=case["case_id"], details={"answer": "The ten seats on the team plan."},
            )
        )  # fmt: skip
    assert await service.recover() == [case["case_id"]]
    recovered = await service.show_case(case["case_id"])
    assert recovered["status"] == "awaiting_approval"
    assert recovered["credit_note"]["id"] != case["credit_note"]["id"]
