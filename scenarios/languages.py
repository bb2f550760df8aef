"""The scenarios' complaints rewritten in each language we reply in (`billsleuth eval --languages`).

A rewrite keeps what the complaint points at — the amount (written the language's way: "1.650,06",
"1 650,06"), the month (by its name in that language, with its year when the original gave one), "last
month", an invoice id, and the name or email address that names the customer — and says it in one of a few
sentences written for each language by hand. A complaint already in the language is kept byte for byte,
so the English run of the committed scenarios is their usual run. The scenario files never change.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date
from decimal import Decimal
from typing import Protocol, TypeVar

from agent.cases.intake import Complaint, parse_complaint
from agent.i18n import LOCALES
from agent.language import Language, detect

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.ASCII)
# How the generator signs a complaint with the customer's name (scenarios/extra_kinds.NAME_SIGN_OFFS).
SIGNED = (
    re.compile(r"\n\nThanks, (?P<name>.+) accounts team$"),
    re.compile(r" —— (?P<name>.+)$"),
    re.compile(r"\((?P<name>[^(]+)财务\)$"),
    re.compile(r" — (?P<name>.+)$"),
)

# Per language: (the month and the amount, the amount, the month, neither); `{month}` is a month name or
# "last month" in that language, `{amount}` a number as the language writes it.
SENTENCES: dict[Language, tuple[str, str, str, str]] = {
    "en": (
        "Hi, we were charged {amount} in {month} and we don't understand why. Could you check it?",
        "Hi, we were charged {amount} and it looks too high. Could you check it?",
        "Hi, something on our {month} invoice doesn't look right. Could you check it?",
        "Hi, we think we were overcharged. Could you check our account?",
    ),
    "zh": (
        "你好,我们 {month}被扣了 {amount} 美元,不明白为什么,麻烦查一下。",
        "你好,我们被扣了 {amount} 美元,感觉太高了,麻烦查一下。",
        "你好,我们 {month}的账单好像不对,麻烦查一下。",
        "你好,我们觉得被多收了钱,麻烦查一下我们的账户。",
    ),
    "es": (
        "Hola, en {month} nos cobraron {amount} y no entendemos por qué. ¿Pueden revisarlo?",
        "Hola, nos cobraron {amount} y nos parece demasiado. ¿Pueden revisarlo?",
        "Hola, creemos que la factura de {month} no está bien. ¿Pueden revisarla?",
        "Hola, creemos que nos cobraron de más. ¿Pueden revisar nuestra cuenta?",
    ),
    "fr": (
        "Bonjour, en {month} vous nous avez prélevé {amount} et nous ne comprenons pas pourquoi. Pouvez-vous vérifier ?",
        "Bonjour, vous nous avez prélevé {amount}, ce qui nous semble trop élevé. Pouvez-vous vérifier ?",
        "Bonjour, notre facture de {month} ne nous semble pas correcte. Pouvez-vous la vérifier ?",
        "Bonjour, nous pensons avoir été trop facturés. Pouvez-vous vérifier notre compte ?",
    ),
    "de": (
        "Guten Tag, im {month} wurden uns {amount} abgebucht, und wir verstehen nicht, warum. Können Sie das prüfen?",
        "Guten Tag, uns wurden {amount} abgebucht, das scheint uns zu hoch. Können Sie das prüfen?",
        "Guten Tag, unsere Rechnung für {month} scheint nicht zu stimmen. Können Sie sie prüfen?",
        "Guten Tag, wir glauben, dass uns zu viel berechnet wurde. Können Sie unser Konto prüfen?",
    ),
    "pt": (
        "Olá, em {month} fomos cobrados em {amount} e não entendemos o motivo. Podem verificar?",
        "Olá, fomos cobrados em {amount} e achamos o valor alto demais. Podem verificar?",
        "Olá, achamos que a fatura de {month} não está certa. Podem verificar?",
        "Olá, achamos que fomos cobrados a mais. Podem verificar a nossa conta?",
    ),
    "ja": (
        "{month}に{amount}ドルが請求されましたが、理由がわかりません。確認していただけますか?",
        "{amount}ドルが請求されましたが、高すぎるようです。確認していただけますか?",
        "{month}の請求書がおかしいようです。確認していただけますか?",
        "過剰に請求されたようです。アカウントを確認していただけますか?",
    ),
    "ko": (
        "{month}에 {amount}달러가 청구되었는데 이유를 모르겠습니다. 확인해 주시겠어요?",
        "{amount}달러가 청구되었는데 너무 많은 것 같습니다. 확인해 주시겠어요?",
        "{month} 청구서가 이상한 것 같습니다. 확인해 주시겠어요?",
        "과다 청구된 것 같습니다. 저희 계정을 확인해 주시겠어요?",
    ),
    "it": (
        "Buongiorno, a {month} ci avete addebitato {amount} e non capiamo il motivo. Potete controllare?",
        "Buongiorno, ci avete addebitato {amount} e ci sembra troppo. Potete controllare?",
        "Buongiorno, la fattura di {month} non ci sembra corretta. Potete controllarla?",
        "Buongiorno, pensiamo di aver pagato troppo. Potete controllare il nostro conto?",
    ),
    "nl": (
        "Goedendag, in {month} is er {amount} afgeschreven en we begrijpen niet waarom. Kunt u het nakijken?",
        "Goedendag, er is {amount} afgeschreven en dat lijkt ons te veel. Kunt u het nakijken?",
        "Goedendag, onze factuur van {month} lijkt niet te kloppen. Kunt u die nakijken?",
        "Goedendag, we denken dat we te veel hebben betaald. Kunt u ons account nakijken?",
    ),
}
# "last month" and "this month" as each language says them (agent.cases.intake reads them all).
RELATIVE: dict[Language, tuple[str, str]] = {
    "en": ("last month", "this month"),
    "zh": ("上个月", "这个月"),
    "es": ("el mes pasado", "este mes"),
    "fr": ("le mois dernier", "ce mois-ci"),
    "de": ("letzten Monat", "diesen Monat"),
    "pt": ("o mês passado", "este mês"),
    "ja": ("先月", "今月"),
    "ko": ("지난달", "이번 달"),
    "it": ("il mese scorso", "questo mese"),
    "nl": ("vorige maand", "deze maand"),
}
INVOICE_NAMED = {
    "en": " (invoice {invoice})",
    "zh": "(发票 {invoice})",
    "es": " (factura {invoice})",
    "fr": " (facture {invoice})",
    "de": " (Rechnung {invoice})",
    "pt": " (fatura {invoice})",
    "ja": "(請求書 {invoice})",
    "ko": " (청구서 {invoice})",
    "it": " (fattura {invoice})",
    "nl": " (factuur {invoice})",
}


class SaysAComplaint(Protocol):
    """A scenario as in_language reads it (evaluation's ScenarioFile): a dataclass, so it can be copied."""

    question: str
    named_by: str | None


Said = TypeVar("Said", bound=SaysAComplaint)


def in_language(scenario: Said, language: Language) -> Said:
    """The scenario with its complaint said in `language` (the original when it is already in it)."""
    if detect(scenario.question).language == language:
        return scenario
    return replace(
        scenario, question=rewrite(scenario.question, language, signed=scenario.named_by is not None)
    )


def rewrite(question: str, language: Language, *, signed: bool = False) -> str:
    """`signed`: the complaint names its customer (a name or an email address), and so does the rewrite."""
    complaint = parse_complaint(question)
    month = _month(complaint, language)
    amount = _amount(complaint.amount, language) if complaint.amount is not None else None
    both, only_amount, only_month, neither = SENTENCES[language]
    if amount and month:
        words = both.format(month=month, amount=amount)
    elif amount:
        words = only_amount.format(amount=amount)
    else:
        words = only_month.format(month=month) if month else neither
    if complaint.invoice_id:
        words += INVOICE_NAMED[language].format(invoice=complaint.invoice_id)
    signature = _signature(question) if signed else None
    return f"{words} — {signature}" if signature else words


def _month(complaint: Complaint, language: Language) -> str | None:
    if complaint.month is None:
        return RELATIVE[language][complaint.months_back] if complaint.months_back in (0, 1) else None
    if language in ("zh", "ja", "ko"):
        year = f"{complaint.year} 年 " if complaint.year and language == "zh" else ""
        suffix = {"zh": " 月", "ja": "月", "ko": "월"}[language]
        if language != "zh" and complaint.year:
            year = f"{complaint.year}年" if language == "ja" else f"{complaint.year}년 "
        return f"{year}{complaint.month}{suffix}"
    from babel.dates import format_skeleton, get_month_names

    if complaint.year:
        return format_skeleton("yMMMM", date(complaint.year, complaint.month, 1), locale=LOCALES[language])
    return get_month_names("wide", locale=LOCALES[language])[complaint.month]


def _amount(amount: Decimal, language: Language) -> str:
    from babel.numbers import format_decimal

    return format_decimal(amount, format="#,##0.00", locale=LOCALES[language])


def _signature(question: str) -> str | None:
    """The name or email address a named scenario's complaint gives for its customer, if any."""
    email = EMAIL.search(question)
    if email:
        return email.group(0)
    for pattern in SIGNED:
        signed = pattern.search(question)
        if signed:
            return signed.group("name").strip()
    return None
