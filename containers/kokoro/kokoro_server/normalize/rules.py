"""The rule table of the second pass: every kind of span, in the order it is tried.

Order matters where two could match at one place: an e-mail before a URL (its host is a domain),
a URL before a file name, dates before times and phone numbers before plain numbers, money and
units before decimals, and plain symbols last. Plain integers are left to misaki (it reads
"2024" as a year and "42" as forty-two already); this table reads what it gets wrong.
"""

from __future__ import annotations

import re

from . import readings as r
from .core import Piece, Rule
from .numbers import cardinal, decimal, ordinal, year

_NUM = r"\d{1,3}(?:,\d{3})+|\d+"
_DEC = rf"[-−]?(?:{_NUM})(?:\.\d+)?"
_MONTH = (r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_CURRENCY_CODES = "|".join(k for k in r.CURRENCIES if k.isalpha())
_UNIT_NAMES = "|".join(re.escape(u) for u in sorted(r.UNITS, key=len, reverse=True))
_EXTENSIONS = "|".join(re.escape(e) for e in sorted(r.EXTENSIONS, key=len, reverse=True))
_TLDS = "com|org|net|io|dev|ai|co|uk|gov|edu|app|info|us|de|fr|ca|au|jp|ly|me|tv|xyz|cloud|tech"
_EMOJI = ("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\u2190-\u21FF\uFE0F\u200D\u20E3"
          "\U000E0020-\U000E007F\U0001F1E6-\U0001F1FF]+")


class WordsRule:
    """A fixed reading ("Dr." -> "Doctor") as a rule's ``speak``."""

    def __init__(self, words: str) -> None:
        self.words = words

    def __call__(self, match: re.Match[str]) -> str:
        return self.words


def _negative(match: re.Match[str]) -> str:
    return f"minus {cardinal(int(match.group(1).replace(',', '')))}"


def _hashtag(match: re.Match[str]) -> str:
    return f"number {cardinal(int(match.group(1)))}" if match.group(1) else f"hashtag {match.group(2)}"


ABBREVIATIONS: tuple[tuple[str, str], ...] = (  # pattern -> reading
    (r"\bDr\.(?=\s)", "Doctor"), (r"\bMr\.(?=\s)", "Mister"), (r"\bMrs\.(?=\s)", "Missus"),
    (r"\bMs\.(?=\s)", "Miz"), (r"\bProf\.(?=\s)", "Professor"), (r"\bSt\.(?=\s+[A-Z])", "Saint"),
    (r"(?<=[a-z] )St\b\.?", "Street"), (r"(?<=[a-z] )Ave\b\.?", "Avenue"), (r"(?<=[a-z] )Rd\b\.?", "Road"),
    (r"\bMt\.(?=\s)", "Mount"), (r"\bJr\b(?=\.)", "Junior"), (r"\bSr\b(?=\.)", "Senior"),
    (r"\b[Ee]\.g\.(?=[\s,])", "for example"), (r"\b[Ii]\.e\.(?=[\s,])", "that is"),
    (r"\bvs\.?(?=\s)", "versus"), (r"\betc\b(?=\.)", "et cetera"), (r"\bapprox\.(?=\s)", "approximately"),
    (r"\bNo\.(?=\s?\d)", "number"), (r"\bDept\.(?=\s)", "Department"), (r"\bLtd\b(?=\.)", "Limited"),
    (r"\bw/o\b", "without"), (r"\bw/(?=\s)", "with"), (r"\bFAQs?\b", "F.A.Q."), (r"\bUS\b", "U.S."),
)
SYMBOLS: tuple[tuple[str, str], ...] = (
    (r"\bC\+\+", "C plus plus"), (r"&", "and"), (r"(?<=\s)=(?=\s)", "equals"), (r"(?<=[\s\d])\+(?=\s?\d)", "plus"),
    (r"(?<=\s)\+(?=\s)", "plus"), (r"±", "plus or minus"), (r"×", "times"), (r"÷", "divided by"),
    (r"≈", "approximately"), (r"≠", "is not equal to"), (r"(?<=\s)(?:->|→)(?=\s)", "to"),
    (r"(?<=\s)>=(?=\s)", "is at least"), (r"(?<=\s)<=(?=\s)", "is at most"),
    (r"(?<=\s)>(?=\s)", "is greater than"), (r"(?<=\s)<(?=\s)", "is less than"), (r"~(?=\d)", "about"),
    (r"°", "degrees"), (r"(?<!\w)@(?=\w)", "at "), (r"(?<=\s)@(?=\s)", "at"), (r"(?<=\d)\s?\*\s?(?=\d)", " times "),
    (r"(?<=\s)\|(?=\s)", ","),
)

RULES: tuple[Rule, ...] = (
    Rule(name="email", group="emails",
         pattern=r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
         speak=r.email),
    Rule(name="url", group="urls",
         pattern=r"\b(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.)[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]]", speak=r.url),
    Rule(name="domain", group="urls",
         pattern=rf"(?<![\w@.-])[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.(?:{_TLDS})\b(?![.\w-]\w)(?:/[^\s]*[^\s.,;:!?)\]])?",
         speak=r.url),
    Rule(name="file_name", group="urls", pattern=rf"(?<![\w./-])([\w-]+)\.({_EXTENSIONS})\b(?![\w]|\.\w)",
         speak=r.file_name),
    Rule(name="money", group="money",
         pattern=rf"(?<![\w$£€¥₹])(?:(?P<sym>[$£€¥₹])\s?|(?P<code>{_CURRENCY_CODES})\s)(?P<num>{_NUM})(?:\.(?P<cents>\d{{1,2}}))?"
                 r"(?:\s?(?P<mag>thousand|million|billion|trillion|bn|k|K|M|B)\b)?(?![\d.]\d)",
         speak=r.money),
    Rule(name="money_after", group="money",
         pattern=rf"(?<![\w.])(?P<num>{_NUM})(?:\.(?P<cents>\d{{1,2}}))?(?P<mag>)\s?(?:(?P<sym>[€£¥₹])|(?P<code>{_CURRENCY_CODES})\b)",
         speak=r.money),
    Rule(name="phone_us", group="phones",
         pattern=r"(?<![\w+])(?:\+?1[\s.-])?(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\w-])", speak=r.phone),
    Rule(name="phone_intl", group="phones", pattern=r"(?<![\w+])\+\d{1,3}(?:[\s.-]\(?\d{1,4}\)?){2,5}(?![\w-])",
         speak=r.phone),
    Rule(name="iso_date", group="dates", pattern=r"(?<![\w.-])(\d{4})-(\d{2})-(\d{2})(?![\w-])", speak=r.iso_date),
    Rule(name="slashed_date", group="dates", pattern=r"(?<![\w/.])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\w/])",
         speak=r.slashed_date),
    Rule(name="month_day", group="dates", pattern=rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?",
         speak=r.month_day),
    Rule(name="day_month", group="dates", pattern=rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s+(\d{{4}})\b)?",
         speak=r.day_month),
    Rule(name="year_range", group="dates",
         pattern=r"(?<![\w.-])((?:1[5-9]|20)\d{2})[-–]((?:1[5-9]|20)\d{2})(?![\w-]|\.\d)",
         speak=lambda m: f"{year(int(m.group(1)))} to {year(int(m.group(2)))}"),
    Rule(name="time", group="times",
         pattern=r"(?<![\w:.])(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s?([AaPp])\.?[Mm]\b)?(?![\w:])", speak=r.time_of_day),
    Rule(name="hour_am_pm", group="times", pattern=r"(?<![\w:.])(\d{1,2})\s?([AaPp])\.?[Mm]\b", speak=r.hour_suffix),
    Rule(name="percent", group="numbers", pattern=rf"(?<![\w.])({_DEC})\s?%", speak=r.percent),
    Rule(name="unit", group="units", pattern=rf"(?<![\w.])({_DEC})(\s?)({_UNIT_NAMES})(?![\w/²³])",
         speak=lambda m: _unit_match(m)),
    Rule(name="version", group="numbers", pattern=r"(?<![\w.])([vV])?(\d+(?:\.\d+){2,})(?![\w]|\.\d)", speak=r.version),
    Rule(name="short_version", group="numbers", pattern=r"(?<![\w.])([vV])(\d+\.\d+)(?![\w]|\.\d)", speak=r.version),
    Rule(name="ordinal", group="numbers", pattern=r"(?<![\w.])(\d+)(?:st|nd|rd|th)\b",
         speak=lambda m: ordinal(int(m.group(1)))),
    Rule(name="fraction", group="numbers", pattern=r"(?<![\w/.])(\d{1,2})/(\d{1,2})(?![\w/]|\.\d)", speak=r.fraction),
    Rule(name="unicode_fraction", group="numbers", pattern="[½¼¾⅓⅔⅛⅜⅝⅞]",
         speak=lambda m: r.UNICODE_FRACTIONS[m.group()]),
    Rule(name="long_digits", group="numbers", pattern=r"\d{16,}", speak=r.long_digits),
    Rule(name="decimal", group="numbers", pattern=rf"(?<![\w.])[-−]?(?:{_NUM})\.\d+(?![\w]|\.\d)",
         speak=lambda m: decimal(m.group())),
    Rule(name="grouped_integer", group="numbers", pattern=r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d]|[.,]\d)",
         speak=lambda m: cardinal(int(m.group().replace(",", "")))),
    Rule(name="negative", group="numbers", pattern=r"(?<![\w.-])[-−](\d+)(?![\w.]|\.\d)", speak=_negative),
    Rule(name="optional_plural", group="plurals", pattern=r"\b([A-Za-z]+)\(s\)(?!\w)",
         speak=lambda m: f"{m.group(1)}s"),
    Rule(name="number_sign", group="symbols", pattern=r"(?<![\w&])#(?:(\d+)|([A-Za-z]\w*))", speak=_hashtag),
    *(Rule(name=f"abbreviation:{words}", group="abbreviations", pattern=pattern, speak=WordsRule(words))
      for pattern, words in ABBREVIATIONS),
    *(Rule(name=f"symbol:{words or 'drop'}", group="symbols", pattern=pattern, speak=WordsRule(words))
      for pattern, words in SYMBOLS),
    Rule(name="emoji", group="emoji", pattern=_EMOJI, speak=lambda m: ""),
)


def _unit_match(match: re.Match[str]) -> str | list[Piece]:
    number, space, symbol = match.group(1), match.group(2), match.group(3)
    if symbol in r.UNITS_TIGHT and space:
        return [match.span()]  # "5 in the box", "2 s": a word after a space, not a unit
    one, many = r.UNITS[symbol]
    return f"{decimal(number)} {r.plural(number, one, many)}"
