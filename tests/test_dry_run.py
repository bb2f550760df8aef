"""`billsleuth dry-run FILE.json`, run as the installed console script on fixture files.

The fixtures under tests/fixtures/dry_run/ reproduce seed 002's hand-computed cases; the error cases are
variations of the upgrade fixture written to a temporary file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli import Done, billsleuth

FIXTURES = Path(__file__).parent / "fixtures" / "dry_run"
# The console script installed next to the interpreter running the tests (the project's venv).
BILLSLEUTH = Path(sys.executable).parent / "billsleuth"

INVOICE_KEYS = [
    "id",
    "period_start",
    "period_end",
    "issued_at",
    "subtotal",
    "discount",
    "tax",
    "total",
    "lines",
]
LINE_KEYS = [
    "kind",
    "description",
    "quantity",
    "unit_amount",
    "amount",
    "period_start",
    "period_end",
    "tax_code",
]
AMOUNT = re.compile(r"-?\d+\.\d{2}")
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def dry_run(path: Path) -> Done:
    return billsleuth("dry-run", str(path))


def invoices_of(name: str) -> list[dict[str, Any]]:
    result = dry_run(FIXTURES / name)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)["invoices"]


def by_id(invoices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {invoice["id"]: invoice for invoice in invoices}


def headline(invoice: dict[str, Any]) -> tuple[str, str, str, str]:
    return invoice["subtotal"], invoice["discount"], invoice["tax"], invoice["total"]


def line_amounts(invoice: dict[str, Any]) -> list[tuple[str, str]]:
    return [(line["kind"], line["amount"]) for line in invoice["lines"]]


def test_the_console_script_is_installed_and_prints_what_the_command_prints() -> None:
    """The tests below run the command in this process (tests/cli.py); the installed script, in a
    process of its own, prints the same."""
    assert BILLSLEUTH.is_file(), f"{BILLSLEUTH} is missing: install the project into the venv"
    path = str(FIXTURES / "plain_monthly.json")
    done = subprocess.run([str(BILLSLEUTH), "dry-run", path], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == dry_run(Path(path)).stdout


# --- seed 002's figures through the command ---------------------------------------------------------


def test_plain_monthly() -> None:
    invoices = invoices_of("plain_monthly.json")
    assert [i["id"] for i in invoices] == ["INV-0001-01", "INV-0001-02", "INV-0001-03"]
    assert [i["period_start"] for i in invoices] == ["2026-06-05", "2026-07-05", "2026-08-05"]
    assert [i["period_end"] for i in invoices] == ["2026-07-05", "2026-08-05", "2026-09-05"]
    assert all(headline(i) == ("117.00", "0.00", "7.02", "124.02") for i in invoices)


def test_upgrade_is_prorated_on_the_next_invoice() -> None:
    invoices = by_id(invoices_of("upgrade.json"))
    assert invoices["INV-0001-01"]["total"] == "124.02"
    second = invoices["INV-0001-02"]
    assert second["total"] == "362.52"
    assert headline(second) == ("342.00", "0.00", "20.52", "362.52")
    assert line_amounts(second) == [
        ("proration", "-58.50"),
        ("proration", "133.50"),
        ("recurring", "267.00"),
        ("tax", "20.52"),
    ]
    credit = second["lines"][0]
    assert (credit["period_start"], credit["period_end"], credit["tax_code"]) == (
        "2026-06-20",
        "2026-07-05",
        "CN-VAT6",
    )


def test_event_date_is_the_customers_local_date() -> None:
    second = by_id(invoices_of("timezone_upgrade.json"))["INV-0001-02"]
    assert second["lines"][0]["amount"] == "-58.50"  # 15 days, not 16
    assert second["lines"][0]["period_start"] == "2026-06-20"
    assert second["total"] == "362.52"


def test_percent_coupon_only_within_its_duration() -> None:
    invoices = invoices_of("welcome_coupon.json")
    assert [i["discount"] for i in invoices] == ["23.40", "23.40", "0.00"]
    assert (invoices[0]["tax"], invoices[0]["total"]) == ("5.62", "99.22")


def test_cancel_stops_after_the_period_end() -> None:
    invoices = invoices_of("cancel.json")
    assert [i["period_start"] for i in invoices] == ["2026-06-05", "2026-07-05"]


def test_tax_rate_follows_its_validity_window() -> None:
    (invoice,) = invoices_of("sg_tax.json")
    assert invoice["tax"] == "10.53"
    assert {line["tax_code"] for line in invoice["lines"]} == {"SG-GST9"}


def test_custom_price_book_lists_are_used() -> None:
    first, second = invoices_of("custom_price_book.json")
    assert line_amounts(first) == [("recurring", "100.00"), ("discount", "-50.00"), ("tax", "5.00")]
    assert headline(first) == ("100.00", "50.00", "5.00", "55.00")
    assert headline(second) == ("100.00", "0.00", "10.00", "110.00")
    assert first["lines"][-1]["tax_code"] == "XX-VAT10"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["events"][0]["payload"].update(plan_id="team-m"), "unknown plan 'team-m'"),
        (lambda d: d["subscription"].update(coupon_id="WELCOME20"), "unknown coupon 'WELCOME20'"),
        (lambda d: d["customer"].update(tax_region="CN"), "unknown tax region 'CN'"),
    ],
    ids=["plans", "coupons", "tax_rates"],
)
def test_custom_lists_replace_the_built_in_ones(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], message: str
) -> None:
    # team-m, WELCOME20 and the CN rate are all built in: once a list is given, they are gone
    data = json.loads((FIXTURES / "custom_price_book.json").read_text(encoding="utf-8"))
    mutate(data)
    assert_refused(write(tmp_path, data), message)


# --- the output shape (DESIGN.md §3) ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_output_shape(name: str) -> None:
    result = dry_run(FIXTURES / name)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["invoices"]
    assert document["invoices"], "every fixture bills at least one invoice"
    for invoice in document["invoices"]:
        assert list(invoice) == INVOICE_KEYS
        assert re.fullmatch(r"INV-\d{4}-\d{2}", invoice["id"])
        for key in ("period_start", "period_end", "issued_at"):
            assert DAY.fullmatch(invoice[key]), (key, invoice[key])
        for key in ("subtotal", "discount", "tax", "total"):
            assert isinstance(invoice[key], str) and AMOUNT.fullmatch(invoice[key]), (key, invoice[key])
        for line in invoice["lines"]:
            assert list(line) == LINE_KEYS
            assert isinstance(line["quantity"], int)
            for key in ("unit_amount", "amount"):
                assert isinstance(line[key], str) and AMOUNT.fullmatch(line[key]), (key, line[key])
            for key in ("period_start", "period_end"):
                assert line[key] is None or DAY.fullmatch(line[key]), (key, line[key])
            assert isinstance(line["tax_code"], str)
        cents = sum(int(line["amount"].replace(".", "")) for line in invoice["lines"])
        assert cents == int(invoice["total"].replace(".", "")), "lines sum to the total"


# --- bad input: exit 2, one line on stderr naming the problem, nothing on stdout ---------------------


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def assert_refused(path: Path, message: str) -> None:
    result = dry_run(path)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("billsleuth: error: ")
    assert message in lines[0]


def _drop(obj: dict[str, Any], key: str) -> None:
    del obj[key]


def _set(obj: dict[str, Any], key: str, value: Any) -> None:
    obj[key] = value


def _float_price(data: dict[str, Any]) -> None:
    data["plans"] = [{"id": "team-m", "name": "Team", "interval": "month", "unit_price": 39.0}]


def _int_price(data: dict[str, Any]) -> None:
    data["plans"] = [{"id": "team-m", "name": "Team", "interval": "month", "unit_price": 39}]


def _coupon(value: str) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["subscription"]["coupon_id"] = "ODD"
        data["coupons"] = [{"id": "ODD", "kind": "percent", "value": value, "duration_months": 3}]

    return mutate


def _coupon_of(kind: str, value: str, months: int = 3) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        data["subscription"]["coupon_id"] = "ODD"
        data["coupons"] = [{"id": "ODD", "kind": kind, "value": value, "duration_months": months}]

    return mutate


def _rate(
    rate: str, valid_from: str = "2020-01-01", valid_to: str | None = None
) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        region = data["customer"]["tax_region"]
        data["tax_rates"] = [
            {"code": "X", "region": region, "rate": rate, "valid_from": valid_from, "valid_to": valid_to}
        ]

    return mutate


def _nan_rate(data: dict[str, Any]) -> None:
    data["tax_rates"] = [{"code": "CN-X", "region": "CN", "rate": "NaN", "valid_from": "2020-01-01"}]


def _huge_price(data: dict[str, Any]) -> None:
    data["plans"] = [{"id": "team-m", "name": "Team", "interval": "month", "unit_price": "1e30"}]


ERRORS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "missing field": (lambda d: _drop(d["customer"], "tax_region"), "customer.tax_region is missing"),
    "money as a JSON float": (_float_price, "plans[0].unit_price must be a money string"),
    "money as a JSON integer": (_int_price, "plans[0].unit_price must be a money string"),
    "unknown plan": (lambda d: _set(d["events"][0]["payload"], "plan_id", "gold-m"), "unknown plan 'gold-m'"),
    "unknown tax region": (lambda d: _set(d["customer"], "tax_region", "XX"), "unknown tax region 'XX'"),
    "unknown country": (lambda d: _set(d["customer"], "country", "FR"), "customer.country must be one of"),
    "month to year switch": (
        lambda d: _set(d["events"][1]["payload"], "to_plan", "team-y"),
        "switching between monthly and yearly billing is not supported",
    ),
    "coupon id not a string": (
        lambda d: _set(d["subscription"], "coupon_id", 20),
        "subscription.coupon_id must be a coupon id string or null",
    ),
    "tax rate not a number": (_nan_rate, "tax_rates[0].rate is not a finite number"),
    "coupon value not finite": (_coupon("Infinity"), "coupons[0].value is not a finite number"),
    "unit price beyond cents precision": (_huge_price, "plans[0].unit_price"),
    "seat count beyond cents precision": (
        lambda d: _set(d["events"][0]["payload"], "quantity", 10**30),
        "too large to bill to the cent",
    ),
    "negative price": (
        lambda d: _set(
            d, "plans", [{"id": "team-m", "name": "Team", "interval": "month", "unit_price": "-39.00"}]
        ),
        "plans[0].unit_price must not be negative, got -39.00",
    ),
    "percent coupon over 100": (
        _coupon_of("percent", "150"),
        "coupons[0].value of a percent coupon must be more than 0 and at most 100, got 150",
    ),
    "amount coupon of zero": (
        _coupon_of("amount", "0.00"),
        "coupons[0].value of an amount coupon must be more than 0, got 0.00",
    ),
    "coupon lasting no month": (
        _coupon_of("percent", "20", months=0),
        "coupons[0].duration_months must be at least 1",
    ),
    "tax rate as a percentage": (_rate("6"), "tax_rates[0].rate is a fraction (0.06 for 6%)"),
    "tax rate window backwards": (
        _rate("0.06", valid_from="2026-01-01", valid_to="2025-01-01"),
        "tax_rates[0].valid_to (2025-01-01) is before valid_from (2026-01-01)",
    ),
    "naive timestamp": (
        lambda d: _set(d["events"][1], "effective_at", "2026-06-20T10:00:00"),
        "events[1].effective_at needs a time zone",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_input_is_refused_with_one_line(tmp_path: Path, case: str) -> None:
    mutate, message = ERRORS[case]
    data = json.loads((FIXTURES / "upgrade.json").read_text(encoding="utf-8"))
    mutate(data)
    assert_refused(write(tmp_path, data), message)


def test_invalid_json_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"customer": ', encoding="utf-8")
    assert_refused(path, "is not valid JSON")


def test_missing_file_is_refused_with_one_line(tmp_path: Path) -> None:
    assert_refused(tmp_path / "nowhere.json", "no such file")


# ---- hostile input: one line, non-zero, never a traceback -----------------------------------------------


def test_a_directory_is_refused_with_one_line(tmp_path: Path) -> None:
    assert_refused(tmp_path, "is a directory")


def test_bytes_that_are_not_utf8_are_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"customer": {"name": "Müller"}}'.encode("latin-1"))
    assert_refused(path, "is not UTF-8")


def test_deeply_nested_json_is_refused_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert_refused(path, "nested too deeply")


def test_an_until_far_in_the_future_is_refused_with_one_line(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "upgrade.json").read_text(encoding="utf-8"))
    data["until"] = "9999-12-31"
    assert_refused(write(tmp_path, data), "until must be between 1900-01-01 and 2999-12-31, got 9999-12-31")
    data["until"] = "2999-12-31"  # a date, but ten centuries of invoices
    assert_refused(write(tmp_path, data), "until must be at most 100 years after subscription.start_date")


# Values at the edges of what a field can hold, tried as often as everything else together.
EDGE_VALUES = ["9999-12-31", "0001-01-01", "", "-0.01", "1e999", "NaN", "99999999999999999999.99", 2**63]


def _scalars() -> Any:
    from hypothesis import strategies as st

    # plus the strings the fields expect (dates, amounts), so values get past the type checks and reach
    # the rules: any date is a valid date, any amount an amount
    dates = st.dates().map(lambda day: day.isoformat())
    amounts = st.decimals(allow_nan=False, allow_infinity=False, places=2).map(str)
    return st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | dates | amounts


def _json_values() -> Any:
    from hypothesis import strategies as st

    return st.recursive(
        _scalars(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
        max_leaves=30,
    )


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    found = [prefix] if prefix else []
    for key, child in items:
        found += _paths(child, (*prefix, key))
    return found


def _requests() -> Any:
    """Arbitrary JSON, and the upgrade fixture with one field (or subtree) replaced by arbitrary JSON."""
    from hypothesis import strategies as st

    base = json.loads((FIXTURES / "upgrade.json").read_text(encoding="utf-8"))
    edges = st.sampled_from(EDGE_VALUES)

    @st.composite
    def mutated(draw: Any) -> Any:
        data = json.loads(json.dumps(base))
        *parents, last = draw(st.sampled_from(_paths(data)))
        node = data
        for key in parents:
            node = node[key]
        node[last] = draw(edges if draw(st.booleans()) else _scalars() | _json_values())
        return data

    return _json_values() | mutated()


def test_arbitrary_json_gets_one_line_or_invoices_never_a_traceback(tmp_path_factory: Any) -> None:
    """In-process (a subprocess per example would take minutes): what the CLI runs for `dry-run FILE`."""
    import argparse

    from hypothesis import HealthCheck, given, settings

    from bot.cli import cmd_dry_run
    from bot.cli.common import CommandError

    folder = tmp_path_factory.mktemp("hypothesis")

    @settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_requests())
    def check(data: Any) -> None:
        path = folder / "request.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        try:
            cmd_dry_run.run(argparse.Namespace(file=path))
        except CommandError as error:
            assert str(error) and "\n" not in str(error)

    check()
