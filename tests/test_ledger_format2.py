"""`billsleuth-ledger/2` (issue 29 item 1): what a Stripe account's ledger needs beyond version 1 —
several items per subscription, one-off invoices, refunds, inclusive tax, a coupon's duration and
currency, the billing system's period instants — imports, re-imports as a no-op, round-trips, and audits
right; a version 1 file may not carry any of it."""

from __future__ import annotations

import copy
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from approvals.ledger_import import LedgerRejected
from engine.db import create_engine
from engine.model import Coupon, Invoice, Line
from tests.test_ledger_import import (
    audit_findings,
    export_text,
    fixture_lines,
    load,
    snapshot,
)

Record = dict[str, Any]
D = Decimal


def _v2_lines() -> list[Record]:
    """The hand-written acme ledger as version 2, with one of each thing version 1 cannot carry."""
    lines = fixture_lines()
    lines[0] = {**lines[0], "version": "billsleuth-ledger/2"}
    for record in lines:
        if record.get("id") == "sub_1PzQa":
            record["items"] = [
                {"id": "si_team", "plan_id": "plan_team_monthly", "quantity": 3},
                {"id": "si_biz", "plan_id": "plan_biz_monthly", "quantity": 1},
            ]
    one_off = {
        "type": "invoice",
        "id": "in_setup_fee",
        "customer_id": "cus_8f3aQz",
        "period_start": "2026-09-01",
        "period_end": "2026-09-02",
        "period_start_at": "2026-09-01T00:00:00-07:00",
        "period_end_at": "2026-09-02T00:00:00-07:00",
        "issued_at": "2026-09-01",
        "status": "paid",
        "subtotal": "250.00",
        "discount": "0.00",
        "tax": "7.50",
        "total": "257.50",
        "currency": "USD",
        "lines": [
            {"id": "il_setup", "kind": "adjustment", "description": "Onboarding", "quantity": 1}
            | {"unit_amount": "250.00", "amount": "250.00"},
            {"id": "il_setup_tax", "kind": "tax", "description": "Tax", "quantity": 1}
            | {"unit_amount": "7.50", "amount": "7.50", "tax_code": "txr_us_3"},
        ],
    }
    inclusive = {
        "type": "invoice",
        "id": "in_sg_incl",
        "customer_id": "acme-7_x",
        "period_start": "2026-09-01",
        "period_end": "2026-10-01",
        "issued_at": "2026-09-01",
        "status": "paid",
        "subtotal": "109.00",
        "discount": "0.00",
        "tax": "9.00",
        "total": "109.00",
        "currency": "SGD",
        "lines": [
            {"id": "il_incl", "kind": "adjustment", "description": "Add-on (tax included)", "quantity": 1}
            | {"unit_amount": "109.00", "amount": "109.00"},
            {"id": "il_incl_tax", "kind": "tax", "description": "GST 9% (included)", "quantity": 1}
            | {"unit_amount": "9.00", "amount": "9.00", "tax_code": "txr_sg_incl", "inclusive": True},
        ],
    }
    return [
        *lines,
        {"type": "coupon", "id": "co_5_off", "kind": "amount", "value": "5.00", "currency": "USD"}
        | {"duration": "forever"},
        {"type": "coupon", "id": "co_once", "kind": "percent", "value": "10", "duration": "once"},
        {"type": "tax_rate", "code": "txr_sg_incl", "region": "SG", "rate": "0.09"}
        | {"valid_from": "2024-01-01", "valid_to": "2024-01-31", "inclusive": True},
        one_off,
        inclusive,
        {"type": "payment", "id": "py_setup", "invoice_id": "in_setup_fee", "amount": "257.50"}
        | {"status": "succeeded", "attempted_at": "2026-09-01T11:00:00+00:00", "gateway_ref": "ch_setup"},
        # A partial refund of the duplicate invoice's payment: the overcharge left is 100.00.
        {"type": "refund", "id": "re_1Ab", "payment_id": "py_1Ab", "amount": "20.51", "status": "succeeded"}
        | {"created_at": "2026-09-02T10:00:00+00:00"},
        # The refund the billing system's own credit note made: counted once, as the note.
        {"type": "refund", "id": "re_sg", "payment_id": "py_sg2_again", "amount": "97.01"}
        | {
            "status": "succeeded",
            "created_at": "2026-09-03T04:00:00+00:00",
            "credit_note_id": "cn_sg_refund",
        },
        {"type": "refund", "id": "re_failed", "payment_id": "py_zx", "amount": "50.47", "status": "failed"}
        | {"created_at": "2026-09-02T10:00:00+00:00"},
    ]


async def test_a_version_2_ledger_imports_again_as_a_no_op_and_round_trips(
    db: AsyncEngine, db_url: str, second_db_url: str
) -> None:
    first = await load(db, _v2_lines())
    assert first.counts["refund"] == {"added": 3, "changed": 0, "unchanged": 0}
    assert first.counts["invoice"] == {"added": 12, "changed": 0, "unchanged": 0}
    assert first.counts["coupon"] == {"added": 2, "changed": 0, "unchanged": 0}
    before = await snapshot(db)
    assert [row[0] for row in sorted(before["subscription_items"])] == ["si_biz", "si_team"]
    again = await load(db, _v2_lines())
    assert all(c["added"] == c["changed"] == 0 for c in again.counts.values()), again.counts
    assert {k: v for k, v in (await snapshot(db)).items() if k != "activity_log"} == {
        k: v for k, v in before.items() if k != "activity_log"
    }
    exported = export_text(db_url)
    assert exported.startswith('{"type": "format", "version": "billsleuth-ledger/2"}')
    copy_ = create_engine(second_db_url)
    try:
        await load(copy_, _as_records(exported))
        assert {k: v for k, v in (await snapshot(copy_)).items() if k != "activity_log"} == {
            k: v for k, v in before.items() if k != "activity_log"
        }
    finally:
        await copy_.dispose()
    assert export_text(second_db_url) == exported


def _as_records(text_: str) -> list[Any]:
    import json

    return [json.loads(line) for line in text_.splitlines()]


async def test_refunds_one_off_invoices_and_inclusive_tax_audit_as_the_rules_say(
    db: AsyncEngine, db_url: str
) -> None:
    await load(db, _v2_lines())
    assert audit_findings(db_url) == [
        ("ZX-41", "in_zx_1", "wrong_plan_price", "10.30"),
        ("cus_8f3aQz", "in_1Ab", "duplicate_invoice", "100.00"),  # 120.51 less the 20.51 refunded
        ("cus_B71x", "in_DE_0815", "cancel_not_respected", "92.82"),
    ]  # the one-off invoices are not the rules' to judge; the note's own refund is not counted twice


async def test_a_version_1_file_may_not_carry_version_2_fields() -> None:
    from engine.interchange_fields import Invalid
    from engine.interchange_records import parse_record

    v2 = {r.get("id") or r.get("code"): r for r in _v2_lines()[1:]}
    cases = {
        "sub_1PzQa": "items: is not a field of a subscription record in billsleuth-ledger/1",
        "co_5_off": "currency: is not a field of a coupon record in billsleuth-ledger/1",
        "txr_sg_incl": "inclusive: is not a field of a tax_rate record in billsleuth-ledger/1",
        "in_setup_fee": "period_end_at: is not a field of a invoice record in billsleuth-ledger/1",
        "in_sg_incl": "lines[1].inclusive: is not a field of an invoice line in billsleuth-ledger/1",
        "re_1Ab": "type: 'refund' is a billsleuth-ledger/2 record type",
    }
    for record_id, message in cases.items():
        with pytest.raises(Invalid) as refused:
            parse_record(v2[record_id], None, version=1)
        assert str(refused.value) == message
        parse_record(v2[record_id], None, version=2)  # and version 2 takes it
    no_subscription = {k: v for k, v in v2["in_setup_fee"].items() if not k.startswith("period_")}
    no_subscription |= {"period_start": "2026-09-01", "period_end": "2026-09-02"}
    with pytest.raises(Invalid, match=r"^subscription_id: missing$"):
        parse_record(no_subscription, None, version=1)


def _edit(lines: list[Record], record_id: str, **changes: Any) -> list[Record]:
    edited = copy.deepcopy(lines)
    for record in edited:
        if record.get("id") == record_id or record.get("code") == record_id:
            record.update(changes)
    return edited


async def test_bad_version_2_records_get_their_one_line_and_nothing_is_written(db: AsyncEngine) -> None:
    lines = _v2_lines()
    at = {r.get("id") or r.get("code"): n for n, r in enumerate(lines, start=1)}
    bad = _edit(lines, "re_1Ab", payment_id="py_nowhere")
    bad = _edit(bad, "re_failed", amount="5.5")
    bad = _edit(bad, "co_once", duration_months=3)
    bad = _edit(bad, "co_5_off", duration="sometimes")
    bad = _edit(bad, "sub_1PzQa", items=[{"id": "si_team", "plan_id": "plan_gold", "quantity": 3}])
    bad = _edit(bad, "txr_sg_incl", inclusive="yes")
    incl = next(r for r in bad if r.get("id") == "in_sg_incl")
    incl["lines"][0]["inclusive"] = True
    before = await snapshot(db)
    with pytest.raises(LedgerRejected) as rejected:
        await load(db, bad)
    assert sorted(rejected.value.errors) == sorted(
        [
            f"ledger.jsonl:{at['re_1Ab']}: payment_id: no payment 'py_nowhere' in the input or the ledger",
            f"ledger.jsonl:{at['re_failed']}: amount: written with 1 decimals; USD amounts have 2",
            f"ledger.jsonl:{at['co_once']}: duration_months: a once coupon's duration_months is 1 "
            "(or left out)",
            f"ledger.jsonl:{at['co_5_off']}: duration: 'sometimes' is not one of once, repeating, forever",
            f"ledger.jsonl:{at['sub_1PzQa']}: items.plan_id: no plan 'plan_gold' in the input or the ledger",
            f"ledger.jsonl:{at['txr_sg_incl']}: inclusive: must be true or false, not a string",
            f"ledger.jsonl:{at['in_sg_incl']}: lines[0].inclusive: only a tax line is inclusive",
        ]
    )
    assert await snapshot(db) == before


def test_a_coupons_duration_and_an_inclusive_tax_line_in_the_model() -> None:
    forever = Coupon("f", "amount", D("5.00"), 0, "forever")
    once = Coupon("o", "percent", D("10"), 1, "once")
    version_1 = Coupon("v", "percent", D("20"), 3)
    assert [forever.covers(m) for m in (0, 1, 40)] == [True, True, True]
    assert [once.covers(m) for m in (0, 1)] == [True, False]
    assert [version_1.covers(m) for m in (2, 3)] == [True, False]
    lines = [Line("recurring", "", 1, D("109.00"), D("109.00")), Line("tax", "", 1, D("9"), D("9"))]
    invoice = Invoice(
        "i", "c", None, date(2026, 9, 1), date(2026, 10, 1), date(2026, 9, 1), "SGD", lines=lines
    )
    assert (invoice.subtotal, invoice.tax, invoice.total) == (D("109.00"), D("9.00"), D("118.00"))
    lines[1].inclusive = True
    assert (invoice.subtotal, invoice.tax, invoice.total) == (D("109.00"), D("9.00"), D("109.00"))
