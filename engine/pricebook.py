"""CloudLedger's built-in price book: plans, coupons and tax rates (all fictional).

US-DST is a made-up digital services tax that drops from 5 % to 3 % on 2026-07-01, so that "an expired
tax rate was used" overcharges the customer, which is when they complain.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal as D

from engine.model import Coupon, Plan, TaxRate

PLANS: dict[str, Plan] = {
    p.id: p
    for p in [
        Plan("starter-m", "Starter (monthly)", "month", D("15.00")),
        Plan("team-m", "Team (monthly)", "month", D("39.00")),
        Plan("business-m", "Business (monthly)", "month", D("89.00")),
        Plan("team-y", "Team (yearly)", "year", D("390.00")),
        Plan("business-y", "Business (yearly)", "year", D("890.00")),
    ]
}

COUPONS: dict[str, Coupon] = {
    c.id: c
    for c in [
        Coupon("WELCOME20", "percent", D("20"), 3),
        Coupon("LAUNCH10", "amount", D("10.00"), 3),
        Coupon("SPRING15", "percent", D("15"), 6),
    ]
}

TAX_RATES: list[TaxRate] = [
    TaxRate("CN-VAT6", "CN", D("0.06"), date(2016, 5, 1), None),
    TaxRate("SG-GST8", "SG", D("0.08"), date(2023, 1, 1), date(2023, 12, 31)),
    TaxRate("SG-GST9", "SG", D("0.09"), date(2024, 1, 1), None),
    TaxRate("DE-VAT19", "DE", D("0.19"), date(2007, 1, 1), None),
    TaxRate("US-DST5", "US", D("0.05"), date(2024, 1, 1), date(2026, 6, 30)),
    TaxRate("US-DST3", "US", D("0.03"), date(2026, 7, 1), None),
]

COUNTRY_TZ: dict[str, str] = {
    "CN": "Asia/Shanghai",
    "SG": "Asia/Singapore",
    "DE": "Europe/Berlin",
    "US": "America/Los_Angeles",
}
