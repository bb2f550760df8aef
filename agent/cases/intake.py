"""Reading a complaint: which customer, which month, which amount, which language. Pure text parsing."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from agent import i18n
from agent.language import Detected, Language, detect

# Seed 002's customer ids (C-0007, c-0007): what a customer id looks like where no ledger is asked (the
# bot's grammar, before any lookup). Intake itself recognises an id by finding it in the ledger.
SEED_CUSTOMER_ID = re.compile(r"C-\d{4,6}", re.IGNORECASE | re.ASCII)
# A word, as far as an id can be one: what stands between spaces and the punctuation around words (not
# the - _ . / # : inside ids). Inside Chinese, written without spaces ("客户C-0007说扣了174.90美元"), an
# id is a run of ASCII letters, digits and those marks.
_WORD = re.compile(r"[^\s,;!?()\[\]{}<>\"'`“”‘’，。；：！？（）【】《》、]+")
_ASCII_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/#-]*", re.ASCII)
_TRAILING = ".:/#-"  # "… on in_1PzQ." : the sentence's full stop is not the id's
MAX_CANDIDATES = 200  # words looked up in the ledger: a pasted novel is not 10,000 lookups
# An amount with cents as any of our languages writes it: "1,174.90", "174,90", "1.650,06", and in French
# "1 650,06" (a space, or the no-break spaces French typesetting puts there).
AMOUNT = re.compile(
    r"(?<![\w.-])(?:(\d{1,3}(?:,\d{3})+|\d+)\.(\d{2})|(\d{1,3}(?:\.\d{3})+|\d+),(\d{2}))(?![\d])", re.ASCII
)
SPACED_AMOUNT = re.compile(r"(?<![\w.,-])(\d{1,3}(?:[ \u00a0\u202f]\d{3})+),(\d{2})(?![\d])")
# "2025年9月" (the year optional), "2025-09" (a date's year and month too), "September 2025" / "Sep 2025".
CHINESE_MONTH = re.compile(r"(?:(20\d{2})\s*年\s*)?(?<!\d)(1[0-2]|0?[1-9])\s*月")
KOREAN_MONTH = re.compile(r"(?:(20\d{2})\s*년\s*)?(?<!\d)(1[0-2]|0?[1-9])\s*월")
ISO_MONTH = re.compile(r"\b(20\d{2})-(0[1-9]|1[0-2])\b", re.ASCII)
# "September 2025", "septiembre de 2025", "setembro de 2025".
YEAR_AFTER_MONTH = re.compile(r"\s*,?\s*(?:de\s+)?(20\d{2})\b", re.ASCII)
# Months counted back from the ledger's own date: intake has no clock (see Asked.months_back).
RELATIVE_MONTH = (
    (
        re.compile(
            r"\blast\s+month(?:'s)?\b|上个?月|先月|지난\s?달|\bmes\s+pasado\b|\bm[eê]s\s+passado\b"
            r"|\bmois\s+dernier\b|\b(?:letzten|vorigen)\s+Monat\b|\bmese\s+scorso\b|\bvorige\s+maand\b",
            re.IGNORECASE,
        ),
        1,
    ),
    (
        re.compile(
            r"\bthis\s+month(?:'s)?\b|这个月|本月|今月|이번\s?달|\beste\s+m[eê]s\b|\bce\s+mois-ci\b"
            r"|\bdiesen\s+Monat\b|\bquesto\s+mese\b|\bdeze\s+maand\b",
            re.IGNORECASE,
        ),
        0,
    ),
)
MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
ENGLISH_MONTH = re.compile(
    r"\b(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\b\.?", re.IGNORECASE
)


@dataclass(frozen=True)
class Asked:
    """What the customer pointed at, if anything: it picks the invoice the answer is about."""

    month: int | None = None  # 1–12
    amount: Decimal | None = None
    invoice_id: str | None = None
    year: int | None = None  # with month: "September 2025"; without one the latest such month is meant
    # "last month" = 1, "this month" = 0: counted back from the ledger's as-of date (its latest invoice),
    # resolved by the auditor. Not from today: intake has no clock, and a ledger's dates may be the past.
    months_back: int | None = None


@dataclass(frozen=True)
class Complaint:
    customer_id: str | None
    month: int | None
    amount: Decimal | None
    language: Language
    invoice_id: str | None = None
    year: int | None = None
    months_back: int | None = None
    # Why the reply is in English though the words may not be (too short, too mixed), else None.
    language_fallback: str | None = None

    @property
    def asked(self) -> Asked:
        return Asked(self.month, self.amount, self.invoice_id, self.year, self.months_back)


def id_candidates(text: str) -> list[str]:
    """Every word of the text that could be an id as a ledger writes it, in order, each once."""
    found: list[str] = []
    for word in _WORD.findall(text):
        found.append(word)
        found.extend(_ASCII_RUN.findall(word))
    cleaned = (word.rstrip(_TRAILING) for word in found)
    return list(dict.fromkeys(word for word in cleaned if word))[:MAX_CANDIDATES]


def quoted_ids(text: str, known: Iterable[str]) -> list[str]:
    """The `known` ids (the ledger's) that the text quotes, in the order it quotes them: as written, or
    in another case where that names one id only ("c-0007", "IN_1PZQ")."""
    exact = set(known)
    folded: dict[str, list[str]] = {}
    for known_id in exact:
        folded.setdefault(known_id.casefold(), []).append(known_id)
    quoted: list[str] = []
    for word in id_candidates(text):
        if word in exact:
            quoted.append(word)
        elif len(same := folded.get(word.casefold(), [])) == 1:
            quoted.append(same[0])
    return list(dict.fromkeys(quoted))


def quoted_customer_ids(text: str, ledger_ids: Iterable[str] | None = None) -> list[str]:
    """The one place a message's customer ids are recognised: those the text quotes, in the order it quotes
    them, each once. With `ledger_ids` (the ledger's own, whatever their shape: agent.cases.customers
    looks the words up) the ones the ledger holds; without, the words shaped like seed 002's ids (C-0007,
    in any case, also between ideographs: "客户C-0007说"), upper-cased as the ledger writes them."""
    if ledger_ids is not None:
        return quoted_ids(text, ledger_ids)
    shaped = (word.upper() for word in id_candidates(text) if SEED_CUSTOMER_ID.fullmatch(word))
    return list(dict.fromkeys(shaped))


def parse_complaint(text: str, names: Iterable[str] = (), invoice_ids: Iterable[str] = ()) -> Complaint:
    """`names`: the customer's names, once known — a name quoted in the words does not set their language.
    `invoice_ids`: the customer's invoices in the ledger; the first the words quote is the one asked about.
    The customer's own id is the ledger's to recognise (agent.cases.customers.customers_quoted)."""
    detected = detect(text, names)
    invoice = next(iter(quoted_ids(text, invoice_ids)), None)
    year, month = _year_and_month(text, detected.language)
    # A month by name wins: in "we cut seats last month, but the June invoice…" June is the invoice.
    relative = (back for pattern, back in RELATIVE_MONTH if pattern.search(text))
    months_back = None if month is not None else next(relative, None)
    return Complaint(
        customer_id=None,
        month=month,
        amount=_amount(text, detected),
        language=detected.language,
        invoice_id=invoice,
        year=year,
        months_back=months_back,
        language_fallback=detected.fallback,
    )


def _amount(text: str, detected: Detected) -> Decimal | None:
    """The first amount with cents, as the customer's language writes it ("1,650.06", "1.650,06")."""
    found = AMOUNT.search(text)
    spaced = SPACED_AMOUNT.search(text) if detected.language == "fr" else None
    if spaced and (found is None or spaced.start() <= found.start()):
        whole, cents = spaced.group(1), spaced.group(2)
        return Decimal(f"{''.join(ch for ch in whole if ch.isdigit())}.{cents}")
    if found is None:
        return None
    whole, cents = (found.group(1), found.group(2)) if found.group(1) else (found.group(3), found.group(4))
    return Decimal(f"{whole.replace('.', '').replace(',', '')}.{cents}")


def _year_and_month(text: str, language: Language) -> tuple[int | None, int | None]:
    """The first month named, with its year when one is written next to it: by number in a CJK or ISO
    form, else by name in the customer's language, else in English."""
    for pattern in (CHINESE_MONTH, KOREAN_MONTH, ISO_MONTH):
        found = pattern.search(text)
        if found:
            year = found.group(1)
            return (int(year) if year else None), int(found.group(2))
    if language in LOCAL_MONTH_LANGUAGES:
        found = _local_months(language).search(text)
        if found:
            year = YEAR_AFTER_MONTH.match(text, found.end())
            number = _local_month_names(language)[_plain(found.group(1) or found.group(2))]
            return (int(year.group(1)) if year else None), number
    found = ENGLISH_MONTH.search(text)
    if found and language in LOCAL_MONTH_LANGUAGES and len(found.group(1)) <= 3:
        found = None  # "mar" is the sea in Spanish, Portuguese and Italian: other languages need a full name
    if found and not (found.group(1).lower() == "may" and _may_is_a_verb(text, found.start())):
        year = YEAR_AFTER_MONTH.match(text, found.end())
        return (int(year.group(1)) if year else None), MONTHS[found.group(1).lower()]
    return None, None


# The Latin-script languages whose own month names intake reads (English names are read in any language).
LOCAL_MONTH_LANGUAGES = ("es", "fr", "de", "pt", "it", "nl")


def _plain(word: str) -> str:
    """Lower case, accents off, no trailing dot: "Févr." and "fevr" are one abbreviation."""
    decomposed = unicodedata.normalize("NFKD", word.lower().rstrip("."))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@functools.cache
def _local_month_names(language: Language) -> dict[str, int]:
    """The language's month names (Babel's CLDR data), wide and abbreviated, plain-lettered."""
    return {
        name: number
        for (name, number) in _month_names(language, "wide") + _month_names(language, "abbreviated")
    }


def _month_names(language: Language, width: str) -> list[tuple[str, int]]:
    from babel.dates import get_month_names

    return [
        (_plain(name), number)
        for context in ("format", "stand-alone")
        for number, name in get_month_names(width, context=context, locale=i18n.LOCALES[language]).items()
    ]


@functools.cache
def _local_months(language: Language) -> re.Pattern[str]:
    """A month name in the language. A short abbreviation ("mar", "set", "out") is also an everyday word,
    so one of three letters or fewer counts only with its dot or a year after it ("set. 2025"); a full
    name always counts ("mei", "mai")."""
    wide = {name for name, _ in _month_names(language, "wide")}
    names = sorted(_local_month_names(language), key=len, reverse=True)
    words = "|".join(_any_accent(n) for n in names if n in wide or len(n) > 3)
    short = "|".join(_any_accent(n) for n in names if n not in wide and len(n) <= 3)
    return re.compile(rf"\b({words})\b\.?|\b({short})(?:\.|(?=\s+(?:de\s+)?20\d{{2}}\b))", re.IGNORECASE)


def _any_accent(plain: str) -> str:
    """A plain-lettered name as a pattern that also matches it with its accents ("fevrier", "février")."""
    accented = {"a": "aàâä", "e": "eéèêë", "i": "iîï", "o": "oôö", "u": "uûüù", "c": "cç"}
    return "".join(f"[{accented[ch]}]" if ch in accented else re.escape(ch) for ch in plain)


def _may_is_a_verb(text: str, at: int) -> bool:
    """'may' is a month in 'in May' / 'May invoice', a verb in 'you may have'."""
    before = text[max(0, at - 6) : at].lower()
    return text[at].islower() and not before.rstrip().endswith(("in", "of", "for"))
