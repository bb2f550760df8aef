"""Nothing depends on the shape of an id (issue 28 item 5): the hand-written ledger, whose ids look nothing
like the seed's, is audited as the seed's is; the extra invoice of a period is the later-issued one, not the
one whose id ends in D; intake finds ids by looking them up in the ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.cases.customers import FoundBy, find_customer
from agent.cases.intake import id_candidates, parse_complaint, quoted_ids
from approvals.ledger_import import import_ledger
from engine.diff import check_ledger, first_of_period
from engine.ledger_load import InputFile
from engine.ledger_stream import _Follower
from engine.model import Customer, CustomerLedger, Event, Invoice, Line, Payment, PriceBook, Subscription
from engine.pricebook import COUPONS, PLANS, TAX_RATES

FIXTURE = Path(__file__).parent / "fixtures" / "ledger" / "acme_billing.jsonl"
BILLSLEUTH = str(Path(sys.executable).with_name("billsleuth"))
BOOK = PriceBook(dict(PLANS), dict(COUPONS), list(TAX_RATES))

# The hand-written ledger's overcharges, worked out by hand (tests/fixtures/ledger/acme_billing.jsonl):
KNOWN = [
    # in_9Zk and in_1Ab both bill September; in_1Ab was created later (its id sorts first), both paid.
    ("cus_8f3aQz", "in_1Ab", "duplicate_invoice", "120.51"),
    # cancelled on 2026-07-20: the period from 2026-08-15 should not have been billed (78.00 + 19 %).
    ("cus_B71x", "in_DE_0815", "cancel_not_respected", "92.82"),
    # billed 49.00 a seat on a 39.00 plan, plus 3 % tax: 50.47 paid, 40.17 due.
    ("ZX-41", "in_zx_1", "wrong_plan_price", "10.30"),
]
# acme-7_x paid in_sg_sep twice, and the billing system's own credit note gave the second payment back.


async def imported(engine: AsyncEngine) -> None:
    await import_ledger(engine, [InputFile(str(FIXTURE), lambda: FIXTURE.open("rb"))], actor="tester")


async def test_audit_all_finds_the_hand_written_ledgers_known_overcharges(
    db: AsyncEngine, db_url: str
) -> None:
    await imported(db)
    done = subprocess.run(
        [BILLSLEUTH, "audit", "--all", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["findings"]
    assert sorted(
        (f["customer_id"], f["invoice_id"], f["root_cause"], f["overcharge"]) for f in found
    ) == sorted(KNOWN)
    duplicate = next(f for f in found if f["invoice_id"] == "in_1Ab")
    assert any("in_9Zk" in line for line in duplicate["evidence"])  # the period's real invoice, by the ledger
    one = subprocess.run(
        [BILLSLEUTH, "audit", "cus_B71x", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    assert one.returncode == 0, one.stderr
    assert [f["invoice_id"] for f in json.loads(one.stdout)["findings"]] == ["in_DE_0815"]


def _ledger(*invoices: Invoice) -> CustomerLedger:
    customer = Customer("acct 7", "Seven", "US", "USD", "US")
    create = Event("e1", "create", datetime(2026, 7, 1, 17, tzinfo=UTC), {"plan_id": "team-m", "quantity": 1})
    sub = Subscription("s-x", customer.id, date(2026, 7, 1), 1, None, [create])
    paid_at = datetime(2026, 7, 2, tzinfo=UTC)
    payments = [Payment(f"p-{inv.id}", inv.id, inv.total, "succeeded", paid_at, "") for inv in invoices]
    return CustomerLedger(customer, [sub], list(invoices), payments)


def _invoice(invoice_id: str, issued: date, created: datetime | None = None) -> Invoice:
    """What the rules bill for July on one Team seat (39.00 + 3 % US tax), under any id."""
    lines = [
        Line("recurring", "Team (monthly) × 1 seats", 1, Decimal("39.00"), Decimal("39.00")),
        Line("tax", "Tax US-DST3 (3%)", 1, Decimal("1.17"), Decimal("1.17")),
    ]
    period = (date(2026, 7, 1), date(2026, 8, 1))
    return Invoice(invoice_id, "acct 7", "s-x", *period, issued, "USD", lines=lines, created_at=created)


@pytest.mark.parametrize(
    ("first", "later"),
    [
        # a later issue date decides, whatever the ids
        (_invoice("zz-9", date(2026, 7, 1)), _invoice("aa-1", date(2026, 7, 2))),
        # same day: the later creation instant decides
        (
            _invoice("zz-9", date(2026, 7, 1), datetime(2026, 7, 1, 8, tzinfo=UTC)),
            _invoice("aa-1", date(2026, 7, 1), datetime(2026, 7, 1, 9, tzinfo=UTC)),
        ),
        # nothing else tells them apart: the later id
        (_invoice("INV-0001-01", date(2026, 7, 1)), _invoice("INV-0001-01D", date(2026, 7, 1))),
    ],
)
def test_the_extra_invoice_of_a_period_is_the_later_issued_one(first: Invoice, later: Invoice) -> None:
    for order in ((first, later), (later, first)):
        ledger = _ledger(*order)
        assert first_of_period(ledger.invoices) == {("s-x", date(2026, 7, 1)): first.id}
        checks = {c.invoice_id: c for c in check_ledger(ledger, BOOK, date(2026, 7, 31))}
        assert checks[first.id].should_exist and not checks[later.id].should_exist
        assert checks[later.id].expected_invoice_id == first.id  # named as the ledger names it
        assert checks[later.id].overcharge == later.total


def test_the_sweeps_streams_are_zipped_in_the_databases_order_not_pythons() -> None:
    """Under a collation such as en_US, "acme-7" sorts before "ZX-41"; Python puts "ZX-41" first. A customer
    with no rows in a stream must not make the follower drop the next customer's rows."""
    invoices = iter([("acme-7", "in_a"), ("ZX-41", "in_z")])  # as Postgres sends them, by its collation
    follower = _Follower(invoices)
    assert follower.take("Ab-1") == []  # a customer without invoices, between the two in that order
    assert follower.take("acme-7") == [("acme-7", "in_a")]
    assert follower.take("cus-none") == []
    assert follower.take("ZX-41") == [("ZX-41", "in_z")]


def test_intake_takes_the_ids_the_ledger_holds_whatever_their_shape() -> None:
    known = ["in_1Ab", "in_9Zk", "INV-0007-05", "in.2026/07#3"]
    assert quoted_ids("Why was in_1Ab charged? And in_9Zk.", known) == ["in_1Ab", "in_9Zk"]
    assert quoted_ids("客户说in_1Ab多扣了120.51美元", known) == ["in_1Ab"]
    assert quoted_ids("check inv-0007-05 please", known) == ["INV-0007-05"]
    assert quoted_ids("the invoice (in.2026/07#3), again", known) == ["in.2026/07#3"]
    assert quoted_ids("in_1Abc and in_1 are not ids of this ledger", known) == []
    assert "C-0007" in id_candidates("客户C-0007说扣了174.90美元")
    complaint = parse_complaint("Please check IN_9ZK: 120.51 in September", invoice_ids=known)
    assert complaint.invoice_id == "in_9Zk"
    assert parse_complaint("Please check in_9Zk", invoice_ids=[]).invoice_id is None  # not this customer's


async def test_a_customer_is_found_by_an_id_the_ledger_holds(db: AsyncEngine) -> None:
    await imported(db)
    for words in (
        "hi, cus_8f3aQz here: charged twice",
        "客户cus_8f3aQz说九月被扣了两次",
        "CUS_8F3AQZ: twice?",
    ):
        match = await find_customer(db, words)
        assert (match.found_by, match.customer and match.customer.id) == (FoundBy.ID, "cus_8f3aQz"), words
    both = await find_customer(db, "ZX-41 and acme-7_x both wrote")
    assert [c.id for c in both.candidates] == ["ZX-41", "acme-7_x"] and both.customer is None
    nobody = await find_customer(db, "cus_0000 is not in this ledger")
    assert nobody.candidates == ()
