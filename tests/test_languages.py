"""Every customer's language: a complaint written in any of the ten gets its reply in that language, with
money and months as its reader writes them, and the reply's numbers are read (grounded, checked for a
leaked amount) the way that language writes them.

The complaints below are written for these tests by hand, not generated from the reply catalogs. The
customer is the default dataset's C-0002 (scenario S002): its July invoice INV-0002-03 was paid 1650.06
USD, the rules say 1328.70, so it was overcharged 321.36.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path

import pytest

from agent import catalogs
from agent.cases.intake import parse_complaint
from agent.cases.service import CaseService, case_service
from agent.graph.configuration import Configuration
from agent.graph.grounding import numbers_in, ungrounded
from agent.graph.state import EvidenceItem
from agent.language import LANGUAGES, detect
from scenarios.evaluation import load_scenarios
from scenarios.generator import DEFAULT_SCENARIOS_DIR
from scenarios.languages import in_language
from tests.test_cases import FINANCE, scenario, settings
from tests.test_eval import TOP_KEYS, one_file_per_variant, run_eval
from tests.test_llm import model_reasoning
from tests.test_llm import open_case as open_llm_case

CUSTOMER, TARGET = "C-0002", "INV-0002-03"
PAID, SHOULD, OVERCHARGE = Decimal("1650.06"), Decimal("1328.70"), Decimal("321.36")

# language: (the complaint: a locale-written amount and a month in that language, the reply's overcharge as
# that language writes it, a word its reply must use)
COMPLAINTS: dict[str, tuple[str, str, str]] = {
    "en": (
        # Today's check counted the quoted (Chinese) invoice line as the customer's words and answered in
        # Chinese; a quoted line is someone else's words.
        "Our July invoice came to $1,650.06 and the line says "
        '"专业版年度订阅费用及税费合计金额". Why so much?',
        "321.36",
        "invoice",
    ),
    "zh": (
        # An English invoice line quoted at length outweighed the Chinese words in today's check.
        "我们 7 月的账单扣了 1,650.06 美元,发票上写着 "
        '"Proration credit for unused time on Business plan, annual billing for the remaining days",'
        "这是什么意思?",
        "321.36 美元",
        "发票",
    ),
    "es": (
        "Hola, en julio nos cobraron 1.650,06 dólares y no entendemos por qué. ¿Pueden revisarlo, por favor?",
        "321,36\xa0US$",
        "factura",
    ),
    "fr": (
        "Bonjour, en juillet vous nous avez prélevé 1 650,06 $. Pourquoi ce montant ? Merci de vérifier.",
        "321,36\xa0$US",
        "facture",
    ),
    "de": (
        "Guten Tag, warum wurden uns im Juli 1.650,06 $ abgebucht? Das kommt uns viel zu hoch vor.",
        "321,36\xa0$",
        "Rechnung",
    ),
    "pt": (
        "Olá, em julho fomos cobrados em US$ 1.650,06 e não entendemos o motivo. Podem verificar, por favor?",
        "US$\xa0321,36",
        "fatura",
    ),
    "ja": (
        "7月に1,650.06ドルが請求されました。金額が高すぎるので、確認していただけますか?",
        "$321.36",
        "請求書",
    ),
    "ko": (
        "7월에 1,650.06달러가 청구되었습니다. 금액이 너무 많은 것 같은데 확인해 주시겠어요?",
        "US$321.36",
        "청구서",
    ),
    "it": (
        "Buongiorno, a luglio ci avete addebitato 1.650,06 dollari. Non capiamo il perché, ci aiutate?",
        "321,36\xa0USD",
        "fattura",
    ),
    "nl": (
        "Goedendag, in juli is er 1.650,06 dollar van onze rekening afgeschreven. Kunt u nagaan waarom?",
        "US$\xa0321,36",
        "factuur",
    ),
}


def test_every_language_we_reply_in_has_a_complaint_here() -> None:
    assert set(COMPLAINTS) == set(LANGUAGES) and len(LANGUAGES) == 10


@pytest.mark.parametrize("language", list(COMPLAINTS))
def test_intake_reads_the_language_the_amount_and_the_month_as_each_language_writes_them(
    language: str,
) -> None:
    complaint = parse_complaint(COMPLAINTS[language][0])
    assert (complaint.language, complaint.amount, complaint.month) == (language, PAID, 7)
    assert complaint.language_fallback is None


@pytest.fixture
async def service(seeded_db_url: str):
    async with case_service(seeded_db_url, Configuration(investigator="offline"), settings()) as svc:
        yield svc


@pytest.mark.parametrize("language", list(COMPLAINTS))
async def test_a_complaint_in_each_language_is_answered_in_it_and_a_reject_rewrites_it_in_it(
    service: CaseService, language: str
) -> None:
    words, overcharge, word = COMPLAINTS[language]
    assert scenario("proration_missing_credit")["customer_id"] == CUSTOMER
    case = await service.open_case(words, requester="U0SUPPORT1", customer_id=CUSTOMER)
    assert case["status"] == "awaiting_approval", case["escalation_reason"]
    assert case["credit_note"]["invoice_id"] == TARGET and case["credit_note"]["amount"] == str(OVERCHARGE)
    reply = case["reply"]["customer_message"]
    assert detect(reply).language == language and word in reply and TARGET in reply
    assert overcharge in reply
    # Read as the language writes numbers, the reply states what was paid, owed and overcharged.
    assert {PAID, SHOULD, OVERCHARGE} <= numbers_in(reply, language)[0]  # type: ignore[arg-type]
    # The internal note stays English, its amounts as always.
    assert f"Overcharge {OVERCHARGE}" in case["reply"]["internal_note"]

    _, after = await service.decide(
        case["credit_note"]["id"], approver=FINANCE[1], decision="reject", comment="agreed price"
    )
    assert after["status"] == "rejected"
    rewritten = after["reply"]["customer_message"]
    assert detect(rewritten).language == language and TARGET in rewritten
    # No amount: the rewrite's numbers, read the language's way, hold none of the invoice's figures.
    assert not {PAID, SHOULD, OVERCHARGE} & numbers_in(rewritten, language)[0]  # type: ignore[arg-type]


async def test_words_too_few_to_tell_get_english_and_the_internal_note_says_why(service: CaseService) -> None:
    case = await service.open_case("¿Y esto? 1.650,06", requester="U0SUPPORT1", customer_id=CUSTOMER)
    assert case["reply"]["customer_message"].startswith("Hello, ")
    assert "The reply is in English: too few words to tell their language." in case["reply"]["internal_note"]


@pytest.mark.parametrize(
    ("text", "names", "language"),
    [
        # Kana means Japanese, however many ideographs stand beside it.
        ("請求書の金額が違います", (), "ja"),
        ("先月請求金額確認願", (), "zh"),
        ("청구서 금액이 이상합니다", (), "ko"),
        # Names, ids, emails and quoted text are not the customer's words.
        ("Hola, somos Acme Widgets Incorporated y C-0042, ¿por qué nos cobraron dos veces?", ("Acme",), "es"),
        ('Guten Tag, auf INV-0042-03 steht "annual renewal of the professional plan", warum?', (), "de"),
        ("ap@billing.example.com: pourquoi la facture de septembre est-elle si élevée ?", (), "fr"),
        ("Kunt u de factuur van september nog eens bekijken? Het bedrag klopt niet.", (), "nl"),
    ],
)
def test_the_customers_own_words_decide_the_language(
    text: str, names: tuple[str, ...], language: str
) -> None:
    assert detect(text, names).language == language


@pytest.mark.parametrize("text", ["Hola", "ok, gracias"])
def test_too_few_words_are_english_with_the_reason(text: str) -> None:
    detected = detect(text)
    assert detected.language == "en" and detected.fallback == "too few words to tell their language"


@pytest.mark.parametrize(
    ("text", "year", "month"),
    [
        ("¿Por qué nos cobraron 174,90 en septiembre de 2025? Gracias.", 2025, 9),
        ("Nous avons été prélevés de 174,90 en févr. sans explication, pourquoi ?", None, 2),
        ("Warum kostet die Rechnung vom März auf einmal so viel mehr als sonst?", None, 3),
        ("Por que a fatura de setembro de 2025 veio tão alta este mês?", 2025, 9),
        ("Perché la fattura di settembre è così alta rispetto al solito?", None, 9),
        ("Waarom is de factuur van mei zo veel hoger dan normaal?", None, 5),
        ("¿Por qué la factura de Sept. es tan alta este mes? No lo entiendo.", None, 9),
        ("2025年9月の請求書が高すぎます。確認してください。", 2025, 9),
        ("2025년 9월 청구서가 너무 많이 나왔습니다. 확인해 주세요.", 2025, 9),
        # A short everyday word that is also an abbreviation ("mar": the sea) is not a month without its dot.
        (
            "Olá, a cobrança veio em dobro, vocês podem ver o que aconteceu? Vimos no mar de faturas.",
            None,
            None,
        ),
    ],
)
def test_intake_reads_months_written_in_the_customers_language(
    text: str, year: int | None, month: int | None
) -> None:
    complaint = parse_complaint(text)
    assert (complaint.year, complaint.month) == (year, month)


def _evidence(value: str) -> list[EvidenceItem]:
    return [{"id": "E1", "tool": "recompute_invoice", "ref": TARGET, "claim": "paid", "value": value}]


@pytest.mark.parametrize(
    ("language", "written"),
    [
        ("de", "1.650,06\xa0$"),
        ("es", "1.650,06 US$"),
        ("fr", "1\u202f650,06 $US"),
        ("fr", "1 650,06 $US"),
        ("pt", "US$ 1.650,06"),
        ("ja", "$1,650.06"),
        ("en", "1,650.06"),
    ],
)
def test_grounding_reads_a_number_the_way_the_locale_writes_it_and_refuses_one_the_evidence_lacks(
    language: str, written: str
) -> None:
    evidence = _evidence("1650.06")
    assert ungrounded(f"Pagó {written}.", evidence, language) == []  # type: ignore[arg-type]
    wrong = written.replace("06", "07")
    assert ungrounded(f"Pagó {wrong}.", evidence, language) == ["1650.07"]  # type: ignore[arg-type]


def test_a_german_thousands_mark_is_not_a_decimal_point() -> None:
    # In German "1.650" is one thousand six hundred and fifty: grounded by 1650, never by 1.65.
    assert ungrounded("Rechnung über 1.650 $", _evidence("1.65"), "de") == ["1650"]
    assert ungrounded("Rechnung über 1.650 $", _evidence("1650.00"), "de") == []


def test_every_catalog_has_words_for_every_message_the_code_asks_for() -> None:
    assert catalogs.missing() == {}


@pytest.mark.parametrize(
    ("reasoning", "kept"),
    [
        ("Bezahlt 1.650,06 $, richtig wären 1.328,70 $.", True),
        ("Bezahlt 1.650,07 $, richtig wären 1.328,70 $.", False),  # a number no tool returned
    ],
)
async def test_the_model_is_told_the_language_and_its_words_are_grounded_in_it(
    seeded_db_url: str, reasoning: str, kept: bool
) -> None:
    sc = scenario("proration_missing_credit")
    words = COMPLAINTS["de"][0]
    case, stub = await open_llm_case(
        seeded_db_url, model_reasoning(sc["truth"], reasoning), sc, question=words
    )
    assert case["status"] == "awaiting_approval", case["escalation_reason"]
    assert "The customer writes in German" in stub.requests[0].messages[1]["content"]
    assert (case["findings"]["reasoning"] == reasoning) is kept
    assert "321,36\xa0$" in case["reply"]["customer_message"]


# ---------- eval --languages ----------


def test_every_scenario_said_in_each_language_points_at_the_same_things() -> None:
    for file in load_scenarios(DEFAULT_SCENARIOS_DIR):
        original = parse_complaint(file.question)
        for language in LANGUAGES:
            said = in_language(file, language)
            if detect(file.question).language == language:
                assert said.question == file.question  # kept byte for byte
            read = parse_complaint(said.question)
            assert (read.language, read.month, read.year, read.months_back, read.amount, read.invoice_id) == (
                language,
                original.month,
                original.year,
                original.months_back,
                original.amount,
                original.invoice_id,
            ), (file.id, said.question)


def test_eval_languages_reports_each_language_with_its_replies_in_it(
    seeded_db_url: str, tmp_path: Path
) -> None:
    chosen = one_file_per_variant(tmp_path / "subset")
    result = run_eval(
        seeded_db_url, tmp_path, "--json", "--scenarios", str(tmp_path / "subset"), "--languages", "es,ko"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {*TOP_KEYS, "languages"} and report["n"] == len(chosen)
    assert list(report["languages"]) == ["es", "ko"]
    for block in report["languages"].values():
        assert block["n"] == len(chosen) and block["failures"] == []
        rates = block["metrics"]
        assert rates["reply_language"]["rate"] == 1.0 and rates["reply_language"]["n"] == len(chosen)
        assert rates["root_cause"]["rate"] == rates["overcharge"]["rate"] == 1.0


def test_a_catalog_edited_since_its_build_is_read_from_its_po(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent import i18n

    messages = tmp_path / "es" / "LC_MESSAGES"
    messages.mkdir(parents=True)
    source = i18n.LOCALE_DIR / "es" / "LC_MESSAGES" / "billsleuth.po"
    stale = source.read_text(encoding="utf-8").replace('msgstr "Hola, {body}"', 'msgstr "Buenas, {body}"')
    (messages / "billsleuth.mo").write_bytes(i18n.compile_po(source))  # as the last build left it
    (messages / "billsleuth.po").write_text(stale, encoding="utf-8")  # edited since
    os.utime(messages / "billsleuth.mo", (0, 0))
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)
    i18n.translations.cache_clear()
    try:
        assert i18n.text("es", "Hello, {body}", body="x") == "Buenas, x"
    finally:
        i18n.translations.cache_clear()
