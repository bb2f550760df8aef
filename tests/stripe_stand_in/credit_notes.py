"""Credit notes as Stripe makes them: preview (nothing stored), create, void. The amount comes from `amount`
or from `lines`; it may not exceed what is left to credit on the invoice; on a paid invoice the refund, the
balance credit and the out-of-band amount must add up to it, as Stripe requires of a post-payment note.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.stripe_stand_in.account import StripeAccount
from tests.stripe_stand_in.errors import StripeError


def preview(account: StripeAccount, params: dict[str, Any]) -> dict[str, Any]:
    invoice = _creditable_invoice(account, params)
    note = _credit_note(account, invoice, params, note_id="cn_preview_" + invoice["id"])
    del note["_moved"]
    return note


def create(account: StripeAccount, params: dict[str, Any]) -> dict[str, Any]:
    invoice = _creditable_invoice(account, params)
    note = _credit_note(account, invoice, params, note_id=account.new_id("credit_note"))
    _move_money(account, invoice, note)
    account.objects.setdefault("credit_note", {})[note["id"]] = note
    account.record_event("credit_note.created", note)
    return note


def void(account: StripeAccount, note_id: str) -> dict[str, Any]:
    note = account.get("credit_note", note_id)
    if note is None:
        raise StripeError.missing("credit_note", note_id)
    if note["status"] == "void":
        raise StripeError.invalid(
            f"Credit note {note_id} is already void.", code="credit_note_already_voided"
        )
    note.update(status="void", voided_at=account.now())
    account.record_event("credit_note.voided", note)
    return note


def credited(account: StripeAccount, invoice_id: str) -> int:
    """What the invoice's notes that are not void credit, in minor units."""
    return sum(
        note["total"]
        for note in account.all("credit_note")
        if note["invoice"] == invoice_id and note["status"] != "void"
    )


def _creditable_invoice(account: StripeAccount, params: dict[str, Any]) -> dict[str, Any]:
    invoice_id = params.get("invoice")
    if not invoice_id:
        raise StripeError.invalid(
            "Missing required param: invoice.", param="invoice", code="parameter_missing"
        )
    invoice = account.get("invoice", invoice_id)
    if invoice is None:
        raise StripeError.missing("invoice", invoice_id, param="invoice")
    if invoice["status"] not in ("open", "paid"):
        raise StripeError.invalid(
            f"Credit notes can only be created on open or paid invoices, and {invoice_id} is "
            f"{invoice['status']}.",
            param="invoice",
            code="invoice_not_editable",
        )
    return invoice


def _credit_note(
    account: StripeAccount, invoice: dict[str, Any], params: dict[str, Any], *, note_id: str
) -> dict[str, Any]:
    lines = [_line(account, invoice, line, note_id) for line in params.get("lines", [])]
    amount = int(params["amount"]) if "amount" in params else sum(line["amount"] for line in lines)
    if "amount" not in params and not lines:
        raise StripeError.invalid("One of `amount`, `lines`, or `shipping_cost` must be provided.")
    left = invoice["total"] - credited(account, invoice["id"])
    if amount <= 0 or amount > left:
        raise StripeError.invalid(
            f"The credit note amount ({amount}) must be positive and at most the invoice's remaining "
            f"creditable amount ({left}).",
            param="amount",
        )
    paid_part = min(amount, invoice["amount_paid"] - _post_payment_credited(account, invoice["id"]))
    moved = {
        name: int(params.get(name, 0)) for name in ("refund_amount", "credit_amount", "out_of_band_amount")
    }
    if sum(moved.values()) != max(paid_part, 0):
        raise StripeError.invalid(
            f"The sum of refund_amount, credit_amount and out_of_band_amount ({sum(moved.values())}) must "
            f"equal the credit note's post-payment amount ({max(paid_part, 0)}).",
        )
    note = account.shaped("credit_note", {"id": note_id})
    note.update(
        amount=amount,
        subtotal=amount,
        subtotal_excluding_tax=amount,
        total=amount,
        total_excluding_tax=amount,
        total_taxes=[],
        amount_shipping=0,
        shipping_cost=None,
        discount_amount=0,
        discount_amounts=[],
        pretax_credit_amounts=[],
        currency=invoice["currency"],
        customer=invoice["customer"],
        customer_balance_transaction=None,
        effective_at=note["created"],
        invoice=invoice["id"],
        memo=params.get("memo"),
        metadata=dict(params.get("metadata") or {}),
        number=f"{invoice.get('number') or invoice['id']}-CN-{_note_count(account, invoice['id']) + 1:02d}",
        out_of_band_amount=moved["out_of_band_amount"] or None,
        post_payment_amount=max(paid_part, 0),
        pre_payment_amount=amount - max(paid_part, 0),
        reason=params.get("reason"),
        refunds=[],
        status="issued",
        type="post_payment" if paid_part > 0 else "pre_payment",
        voided_at=None,
        pdf=f"https://pay.stripe.com/credit_notes/{note_id}/pdf",
    )
    note["lines"] = {
        "object": "list",
        "data": lines,
        "has_more": False,
        "url": f"/v1/credit_notes/{note_id}/lines",
    }
    note["_moved"] = moved  # read by _move_money, never served
    return note


def _line(
    account: StripeAccount, invoice: dict[str, Any], described: dict[str, Any], note_id: str
) -> dict[str, Any]:
    line = copy.deepcopy(account.shaped("credit_note_line_item", {}))
    line_type = described.get("type")
    if line_type == "invoice_line_item":
        invoice_line = next(
            (item for item in invoice["lines"]["data"] if item["id"] == described.get("invoice_line_item")),
            None,
        )
        if invoice_line is None:
            raise StripeError.invalid("No such invoice line item.", param="lines[invoice_line_item]")
        amount = int(described.get("amount", invoice_line["amount"]))
        if amount > invoice_line["amount"]:
            raise StripeError.invalid("A line's credit exceeds its invoice line.", param="lines[amount]")
        description = invoice_line.get("description")
    elif line_type == "custom_line_item":
        amount = int(described["unit_amount"]) * int(described.get("quantity", 1))
        description = described.get("description")
    else:
        raise StripeError.invalid("Missing required param: lines[type].", param="lines[type]")
    line.update(
        amount=amount,
        description=description,
        discount_amount=0,
        discount_amounts=[],
        invoice_line_item=described.get("invoice_line_item"),
        quantity=int(described.get("quantity", 1)),
        tax_rates=[],
        taxes=[],
        pretax_credit_amounts=[],
        type=line_type,
        metadata=described.get("metadata"),
    )
    line["credit_note"] = note_id
    return line


def _move_money(account: StripeAccount, invoice: dict[str, Any], note: dict[str, Any]) -> None:
    """The refund and the balance credit a created note makes; the invoice's credited amounts."""
    moved = note.pop("_moved")
    if moved["refund_amount"]:
        refund = account.add(
            "refund",
            amount=moved["refund_amount"],
            currency=invoice["currency"],
            charge=None,
            payment_intent=None,
            status="succeeded",
        )
        note["refunds"] = [{"amount_refunded": refund["amount"], "refund": refund["id"], "type": "refund"}]
    if moved["credit_amount"]:
        transaction_id = account.new_id("customer_balance_transaction")
        note["customer_balance_transaction"] = transaction_id
        customer = account.get("customer", invoice["customer"])
        if customer is not None:
            customer["balance"] -= moved["credit_amount"]
    invoice["post_payment_credit_notes_amount"] += note["post_payment_amount"]
    invoice["pre_payment_credit_notes_amount"] += note["pre_payment_amount"]
    invoice["amount_remaining"] = max(invoice["amount_remaining"] - note["pre_payment_amount"], 0)


def _post_payment_credited(account: StripeAccount, invoice_id: str) -> int:
    return sum(
        note["post_payment_amount"]
        for note in account.all("credit_note")
        if note["invoice"] == invoice_id and note["status"] != "void"
    )


def _note_count(account: StripeAccount, invoice_id: str) -> int:
    return sum(1 for note in account.all("credit_note") if note["invoice"] == invoice_id)
