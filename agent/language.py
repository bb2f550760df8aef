"""Which language the customer wrote in: the one their reply is drafted in.

The script decides first, because it is certain where a statistical model guesses: kana is Japanese however
many ideographs stand beside it, Hangul is Korean, ideographs without kana are Chinese. Latin-script text
goes to py3langid (its model ships inside its wheel: nothing is downloaded at run time), restricted to the
languages we reply in. Only the customer's own words count: ids, email addresses, the customer's names and
quoted text (a pasted invoice line) are taken out first. Too few words, or words the model cannot place
with confidence, give English, and say so (the internal note carries it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

# Every language a reply can be in; "zh" is simplified Chinese, "pt" Brazilian Portuguese (see agent.i18n).
Language = Literal["en", "zh", "es", "fr", "de", "pt", "ja", "ko", "it", "nl"]
LANGUAGES: tuple[Language, ...] = ("en", "zh", "es", "fr", "de", "pt", "ja", "ko", "it", "nl")
LATIN_SCRIPT: tuple[Language, ...] = ("en", "es", "fr", "de", "pt", "it", "nl")
NAMES: dict[Language, str] = {
    "en": "English",
    "zh": "Chinese (simplified)",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "pt": "Portuguese (Brazil)",
    "ja": "Japanese",
    "ko": "Korean",
    "it": "Italian",
    "nl": "Dutch",
}

# What says nothing about the language a customer writes in: ids (C-0007, INV-0007-09), email addresses,
# code names (duplicate_charge, in a linked case's opening words).
QUOTED_TOKENS = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b[A-Za-z]{1,4}-[0-9][0-9A-Za-z-]*|\b[a-z]+(?:_[a-z]+)+\b", re.ASCII
)
# Quoted text (an invoice line pasted between quotes, a '>' quoted line) is someone else's words.
QUOTED_TEXT = re.compile(r'"[^"\n]*"|“[^”\n]*”|«[^»\n]*»|„[^“”\n]*[“”]|「[^」\n]*」|^\s*>.*$', re.MULTILINE)
# One ideograph carries about as much as a short word: a sentence is written in a CJK script when its CJK
# characters, weighted so, outnumber its Latin letters ("Hi, this is 星河咨询, why…" is English).
IDEOGRAPH_WEIGHT = 3
# Below this many letters a Latin-script text is too short to tell ("Hola", "ok"): English.
MIN_LETTERS = 12
# py3langid's normalised probability under which the words are too mixed to tell: English.
MIN_CONFIDENCE = 0.8


@dataclass(frozen=True)
class Detected:
    language: Language
    # Why the reply is in English although the words may not be: None when the language was told.
    fallback: str | None = None


def _is_ideograph(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf"


def _is_kana(ch: str) -> bool:
    return "\u3040" <= ch <= "\u30ff" or "\u31f0" <= ch <= "\u31ff" or "\uff66" <= ch <= "\uff9f"


def _is_hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7af" or "\u1100" <= ch <= "\u11ff" or "\u3130" <= ch <= "\u318f"


def customer_words(text: str, names: Iterable[str] = ()) -> str:
    """The customer's own words: ids, email addresses, quoted text and the names given taken out (the
    customer's, once known — the ledger's may be Chinese or English whatever the customer writes)."""
    words = QUOTED_TEXT.sub(" ", QUOTED_TOKENS.sub(" ", text))
    for name in sorted((n for n in names if n.strip()), key=len, reverse=True):
        words = re.sub(re.escape(name.strip()), " ", words, flags=re.IGNORECASE)
    if not any(ch.isalpha() for ch in words):  # nothing but a name: it is all there is to go on
        return text
    return words


def detect(text: str, names: Iterable[str] = ()) -> Detected:
    """The language of the customer's own words, or English with the reason it could not be told."""
    words = customer_words(text, names)
    kana = sum(1 for ch in words if _is_kana(ch))
    hangul = sum(1 for ch in words if _is_hangul(ch))
    ideographs = sum(1 for ch in words if _is_ideograph(ch))
    latin = sum(1 for ch in words if (ch.isascii() and ch.isalpha()) or "\u00c0" <= ch <= "\u024f")
    cjk = kana + hangul + ideographs
    if cjk and cjk * IDEOGRAPH_WEIGHT >= latin:
        if kana:
            return Detected("ja")
        return Detected("ko") if hangul >= ideographs else Detected("zh")
    if latin < MIN_LETTERS:
        return Detected("en", "too few words to tell their language")
    language, confidence = _identifier().classify(words)
    if confidence < MIN_CONFIDENCE:
        return Detected("en", f"the words are too mixed to tell their language (best guess {language})")
    return Detected(language)


def language_of(text: str, names: Iterable[str] = ()) -> Language:
    return detect(text, names).language


_LOADING = threading.Lock()
_LOADED: list[Any] = []


def _identifier() -> Any:
    """py3langid's identifier, loaded once a process (about a second: the model is decompressed). A lock,
    so a warm-up thread and a first complaint never load it twice."""
    with _LOADING:
        if not _LOADED:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            identifier.set_languages(list(LATIN_SCRIPT))
            _LOADED.append(identifier)
    return _LOADED[0]


def warm_up() -> None:
    """Load the model now (a long-running process does it at start, not on its first complaint)."""
    _identifier()


def warm_up_beside() -> threading.Thread:
    """Load the model in a thread while the caller prepares other things (eval copies its ledger)."""
    loading = threading.Thread(target=warm_up, name="language-model", daemon=True)
    loading.start()
    return loading
