"""The price book is read once per process while it stands still, and afresh as soon as any of its rows
changes (a reseed, a corrected price): a cached book may never bill with yesterday's prices."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from engine.ledger import load_price_book


async def test_an_unchanged_price_book_is_not_read_again(seeded_db: AsyncEngine) -> None:
    async with seeded_db.connect() as conn:
        first = await load_price_book(conn)
        again = await load_price_book(conn)
    assert again is first


async def test_a_changed_row_of_any_table_is_read_at_once(seeded_db: AsyncEngine) -> None:
    async with seeded_db.connect() as conn:
        before = await load_price_book(conn)
    plan_id = sorted(before.plans)[0]
    rate = before.tax_rates[0]
    coupon_id = sorted(before.coupons)[0]
    changes = [
        (
            "UPDATE plans SET unit_price = unit_price + 1 WHERE id = :id",
            {"id": plan_id},
            lambda book: book.plans[plan_id].unit_price == before.plans[plan_id].unit_price + 1,
        ),
        (
            "UPDATE tax_rates SET rate = rate + 0.01 WHERE code = :code AND valid_from = :valid_from",
            {"code": rate.code, "valid_from": rate.valid_from},
            lambda book: any(
                r.code == rate.code and r.rate == rate.rate + Decimal("0.01") for r in book.tax_rates
            ),
        ),
        (
            "UPDATE coupons SET duration_months = coalesce(duration_months, 0) + 1 WHERE id = :id",
            {"id": coupon_id},
            lambda book: (
                book.coupons[coupon_id].duration_months
                == (before.coupons[coupon_id].duration_months or 0) + 1
            ),
        ),
    ]
    for statement, params, shows_it in changes:
        async with seeded_db.begin() as conn:
            await conn.execute(text(statement), params)
        async with seeded_db.connect() as conn:
            after = await load_price_book(conn)
        assert shows_it(after), statement
