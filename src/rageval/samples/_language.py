"""The language of a row, for the judge prompts (docs/languages.md): stated by the row (a
``language`` column, kept in its metadata) or detected from its texts by a small detector with
no dependency: the script of the letters, then, for Latin letters, the share of each
language's commonest words.

The detector says a language only when the evidence is clear (else None: the prompts say
nothing about the language, as before this setting). It tells apart English, German, Spanish,
French, Italian, Portuguese and Dutch by their function words, and Chinese, Japanese, Korean,
Thai, Arabic, Hebrew, Greek, Russian and Hindi by their scripts.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rageval.samples._rows import Sample

#: every ISO 639-1 code, with the English name a prompt states (183 codes, 2026)
_ISO_639_1 = (
    "aa Afar;ab Abkhazian;ae Avestan;af Afrikaans;ak Akan;am Amharic;an Aragonese;ar Arabic;"
    "as Assamese;av Avaric;ay Aymara;az Azerbaijani;ba Bashkir;be Belarusian;bg Bulgarian;"
    "bi Bislama;bm Bambara;bn Bengali;bo Tibetan;br Breton;bs Bosnian;ca Catalan;ce Chechen;"
    "ch Chamorro;co Corsican;cr Cree;cs Czech;cu Church Slavonic;cv Chuvash;cy Welsh;"
    "da Danish;de German;dv Divehi;dz Dzongkha;ee Ewe;el Greek;en English;eo Esperanto;"
    "es Spanish;et Estonian;eu Basque;fa Persian;ff Fulah;fi Finnish;fj Fijian;fo Faroese;"
    "fr French;fy Western Frisian;ga Irish;gd Scottish Gaelic;gl Galician;gn Guarani;"
    "gu Gujarati;gv Manx;ha Hausa;he Hebrew;hi Hindi;ho Hiri Motu;hr Croatian;"
    "ht Haitian Creole;hu Hungarian;hy Armenian;hz Herero;ia Interlingua;id Indonesian;"
    "ie Interlingue;ig Igbo;ii Sichuan Yi;ik Inupiaq;io Ido;is Icelandic;it Italian;"
    "iu Inuktitut;ja Japanese;jv Javanese;ka Georgian;kg Kongo;ki Kikuyu;kj Kuanyama;"
    "kk Kazakh;kl Kalaallisut;km Khmer;kn Kannada;ko Korean;kr Kanuri;ks Kashmiri;ku Kurdish;"
    "kv Komi;kw Cornish;ky Kyrgyz;la Latin;lb Luxembourgish;lg Ganda;li Limburgish;"
    "ln Lingala;lo Lao;lt Lithuanian;lu Luba-Katanga;lv Latvian;mg Malagasy;mh Marshallese;"
    "mi Maori;mk Macedonian;ml Malayalam;mn Mongolian;mr Marathi;ms Malay;mt Maltese;"
    "my Burmese;na Nauru;nb Norwegian Bokmål;nd North Ndebele;ne Nepali;ng Ndonga;nl Dutch;"
    "nn Norwegian Nynorsk;no Norwegian;nr South Ndebele;nv Navajo;ny Chichewa;oc Occitan;"
    "oj Ojibwa;om Oromo;or Odia;os Ossetian;pa Punjabi;pi Pali;pl Polish;ps Pashto;"
    "pt Portuguese;qu Quechua;rm Romansh;rn Kirundi;ro Romanian;ru Russian;rw Kinyarwanda;"
    "sa Sanskrit;sc Sardinian;sd Sindhi;se Northern Sami;sg Sango;si Sinhala;sk Slovak;"
    "sl Slovenian;sm Samoan;sn Shona;so Somali;sq Albanian;sr Serbian;ss Swati;"
    "st Southern Sotho;su Sundanese;sv Swedish;sw Swahili;ta Tamil;te Telugu;tg Tajik;"
    "th Thai;ti Tigrinya;tk Turkmen;tl Tagalog;tn Tswana;to Tongan;tr Turkish;ts Tsonga;"
    "tt Tatar;tw Twi;ty Tahitian;ug Uyghur;uk Ukrainian;ur Urdu;uz Uzbek;ve Venda;"
    "vi Vietnamese;vo Volapük;wa Walloon;wo Wolof;xh Xhosa;yi Yiddish;yo Yoruba;za Zhuang;"
    "zh Chinese;zu Zulu"
)
#: ISO 639-1 code -> the language's English name, as a prompt states it
LANGUAGE_NAMES = dict(entry.split(" ", 1) for entry in _ISO_639_1.split(";"))
#: a language code with an optional region or script: "de", "pt-BR", "zh_Hant"
_CODE = re.compile(r"([A-Za-z]{2})(?:[-_][A-Za-z0-9]{2,8})*")

#: each Latin-script language's commonest function words (short, frequent, and rare in the
#: others: "de" and "la" are left to the languages where they are most of the evidence)
_FUNCTION_WORDS = {
    "en": "the and of to is in that it was for with as are on be by this which have from",
    "de": "der die das und ist nicht ein eine zu den von mit sich des auf für im dem wird auch",
    "es": "el la de los las y es en que del un una con para lo como más pero su al fue",
    "fr": "le la de les et est des du un une dans pour qui pas sur au aux il ce sont par été",
    "it": "il di che è e un una per non del della sono con gli nel alla anche",
    "pt": "o os e é do da em um uma não com no na dos das ao foi são também pelo",
    "nl": "de het een en is van dat niet in op te zijn met voor er die maar ook",
}
_WORDS = {lang: frozenset(words.split()) for lang, words in _FUNCTION_WORDS.items()}
_WORD = re.compile(r"[^\W\d_]+")

#: a script's letters (by their Unicode name's first word) -> the language they stand for
_SCRIPTS = {
    "HANGUL": "ko",
    "THAI": "th",
    "ARABIC": "ar",
    "HEBREW": "he",
    "GREEK": "el",
    "CYRILLIC": "ru",
    "DEVANAGARI": "hi",
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "CJK": "zh",
}
#: how much of a text the detector reads
_READ = 2000


def _script(char: str) -> str | None:
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else None


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the language `text` is written in, or None when the detector
    cannot tell (too few words, or a language it does not know)."""
    text = text[:_READ]
    scripts = Counter(_script(c) for c in text if c.isalpha())
    if not scripts:
        return None
    latin = scripts.pop("LATIN", 0)
    # Japanese writes Han with kana: any kana makes a Han text Japanese
    if scripts and (scripts["HIRAGANA"] or scripts["KATAKANA"]):
        return "ja" if sum(scripts.values()) > latin else _latin(text)
    script, count = max(scripts.items(), key=lambda kv: kv[1], default=(None, 0))
    if script is not None and count > latin and script in _SCRIPTS:
        return _SCRIPTS[script]
    return _latin(text)


def _latin(text: str) -> str | None:
    words = [w.lower() for w in _WORD.findall(text)]
    hits = Counter({lang: sum(w in common for w in words) for lang, common in _WORDS.items()})
    ranked = hits.most_common(2)
    best, score = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0
    # at least three function words, and clearly more than the next language's
    if score >= 3 and score >= 1.5 * runner_up:
        return best
    return None


def language_name(language: str) -> str:
    """How a prompt names `language`: a known ISO 639-1 code's English name (of its first
    part: "pt-BR" is Portuguese), else the text as the user gave it ("Deutsch", "Swiss
    German")."""
    text = language.strip()
    code = _CODE.fullmatch(text)
    if code:
        return LANGUAGE_NAMES.get(code.group(1).lower(), text)
    return text


def language_problem(language: object) -> str | None:
    """What is wrong with `language` as a stated language, or None when a prompt can state
    it: a text (a number, a list... is not one), a two-letter code (with an optional region,
    "pt-BR") must be an ISO 639-1 code, and a name must be one short line with a letter in
    it."""
    if not isinstance(language, str):
        return (
            f"{language!r} is not a language: give a text, an ISO 639-1 code (de) or a name "
            "(German)"
        )
    text = language.strip()
    code = _CODE.fullmatch(text)
    if code and code.group(1).lower() not in LANGUAGE_NAMES:
        return (
            f"unknown language code {text!r}: give an ISO 639-1 code (de, fr, pt-BR...) "
            "or the language's name (German)"
        )
    if not any(c.isalpha() for c in text) or len(text) > 40 or "\n" in text:
        return f"{text!r} is not a language: give an ISO 639-1 code (de) or a name (German)"
    return None


def sample_language(sample: Sample) -> str | None:
    """The language `sample` is judged in: its ``language`` column (kept in its metadata;
    blank: detected), else detected from its question, response and first context."""
    stated = sample.metadata.get("language")
    if isinstance(stated, str) and stated.strip():
        return stated.strip()
    parts = [sample.text("user_input"), sample.text("response")]
    parts += (sample.retrieved_contexts or [])[:1]
    if not any(parts) and getattr(sample, "turns", None):
        parts = [t.content or "" for t in getattr(sample, "turns", [])]
    return detect_language("\n".join(p for p in parts if p))
