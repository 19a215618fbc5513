"""How a person reads each kind of span an LLM writes: one function per kind, words out.

Each takes the rule's match and returns the words a listener should hear; the tables below are
the vocabulary (currencies, units, months, file extensions). Choices, so a reader can argue:
money as "X dollars and Y cents"; times as a clock reads ("nine fifteen", "nine o'clock", "nine
oh five a m"); dates as "March fifteenth, twenty twenty four" (a slashed date is US month/day
unless its first number cannot be a month); phone numbers digit by digit in their groups; URLs
without their scheme and query ("docs dot aws dot amazon dot com slash x").
"""

from __future__ import annotations

import re

from .numbers import cardinal, decimal, digit_groups, digits, ordinal, year

CURRENCIES = {  # symbol or code -> (one, many, minor one, minor many)
    "$": ("dollar", "dollars", "cent", "cents"), "USD": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"), "GBP": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"), "EUR": ("euro", "euros", "cent", "cents"),
    "¥": ("yen", "yen", "", ""), "JPY": ("yen", "yen", "", ""),
    "₹": ("rupee", "rupees", "paisa", "paise"), "INR": ("rupee", "rupees", "paisa", "paise"),
    "CAD": ("Canadian dollar", "Canadian dollars", "cent", "cents"),
    "AUD": ("Australian dollar", "Australian dollars", "cent", "cents"),
    "CHF": ("Swiss franc", "Swiss francs", "centime", "centimes"),
}
MAGNITUDES = {"k": "thousand", "K": "thousand", "M": "million", "B": "billion", "bn": "billion",
              "thousand": "thousand", "million": "million", "billion": "billion", "trillion": "trillion"}
UNITS = {  # symbol -> (one, many)
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"), "m/s": ("meter per second", "meters per second"),
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"), "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"), "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"),
    "L": ("liter", "liters"), "l": ("liter", "liters"), "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"), "°": ("degree", "degrees"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "kW": ("kilowatt", "kilowatts"), "W": ("watt", "watts"),
    "V": ("volt", "volts"), "TB": ("terabyte", "terabytes"), "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"), "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"),
    "Gbps": ("gigabit per second", "gigabits per second"), "Mbps": ("megabit per second", "megabits per second"),
    "GHz": ("gigahertz", "gigahertz"), "MHz": ("megahertz", "megahertz"), "kHz": ("kilohertz", "kilohertz"),
    "Hz": ("hertz", "hertz"), "ms": ("millisecond", "milliseconds"), "sec": ("second", "seconds"),
    "s": ("second", "seconds"), "min": ("minute", "minutes"), "mins": ("minute", "minutes"),
    "hr": ("hour", "hours"), "hrs": ("hour", "hours"), "h": ("hour", "hours"),
    "ft": ("foot", "feet"), "in": ("inch", "inches"), "mi": ("mile", "miles"), "yd": ("yard", "yards"),
    "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"), "oz": ("ounce", "ounces"), "psi": ("psi", "psi"),
}
# Units that need the number right against them ("10in", not "10 in the box").
UNITS_TIGHT = frozenset({"in", "s", "h", "m", "g", "l", "W", "V"})
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
# Letters are spelled in capitals ("MD", "AM"): misaki reads an unknown all-capital word letter
# by letter, while a lone lowercase "a" is the article. A few it knows as words get dots ("A.W.S.").
EXTENSIONS = {  # file extension -> how it is said
    "md": "MD", "py": "PY", "js": "JS", "ts": "TS", "tsx": "TSX", "jsx": "JSX", "json": "jason",
    "yaml": "yammel", "yml": "YML", "toml": "tommel", "txt": "text", "csv": "CSV", "html": "HTML",
    "css": "CSS", "sh": "SH", "rs": "RS", "go": "go", "java": "java", "cpp": "CPP", "rb": "RB",
    "ipynb": "IPYNB", "pdf": "PDF", "png": "PNG", "jpg": "J peg", "env": "env", "lock": "lock",
    "cfg": "CFG", "ini": "INI", "xml": "XML", "sql": "SQL", "log": "log", "zip": "zip", "gz": "GZ",
    "tar": "tar", "mp3": "MP3", "wav": "wave", "docx": "doc X", "xlsx": "XLSX",
}
# Parts of host names a person spells out.
HOST_PARTS = {"www": "WWW", "io": "IO", "ai": "AI", "uk": "UK", "us": "U.S.", "edu": "E.D.U.", "api": "API",
              "aws": "A.W.S.", "gcp": "GCP", "gov": "gov", "org": "org", "com": "com", "net": "net"}
_VOWELS = set("aeiouy")


def plural(count: str, one: str, many: str) -> str:
    return one if count.strip() in ("1", "1.0", "-1") else many


def money(match: re.Match[str]) -> str:
    symbol = match.group("sym") or match.group("code") or ""
    one, many, minor_one, minor_many = CURRENCIES.get(symbol, CURRENCIES["$"])
    whole, cents, mag = match.group("num").replace(",", ""), match.group("cents"), match.group("mag")
    if mag:
        number = decimal(f"{whole}.{cents}" if cents else whole)
        return f"{number} {MAGNITUDES[mag]} {many}"
    major = int(whole)
    minor = int(cents.ljust(2, "0")) if cents and minor_many else 0
    parts = [] if major == 0 and minor else [f"{cardinal(major)} {one if major == 1 else many}"]
    if minor:
        parts.append(f"{cardinal(minor)} {minor_one if minor == 1 else minor_many}")
    return " and ".join(parts)


def percent(match: re.Match[str]) -> str:
    return f"{decimal(match.group(1))} percent"


def clock(hour: int, minute: int, suffix: str | None) -> str:
    """How a clock time is read; ``suffix`` a.m./p.m. when written."""
    if suffix:
        said = cardinal(hour) if minute == 0 else f"{cardinal(hour)} {'oh ' if minute < 10 else ''}{cardinal(minute)}"
        return f"{said} {suffix[0].upper()}M"
    if minute == 0:
        return f"{cardinal(hour)} hundred" if hour > 12 or hour == 0 else f"{cardinal(hour)} o'clock"
    return f"{cardinal(hour)} {'oh ' if minute < 10 else ''}{cardinal(minute)}"


def time_of_day(match: re.Match[str]) -> str | list[tuple[int, int]]:
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 24 or minute > 59:
        return [match.span()]
    said = clock(hour, minute, match.group(4))
    if match.group(3):
        said += f" and {cardinal(int(match.group(3)))} seconds"
    return said


def hour_suffix(match: re.Match[str]) -> str | list[tuple[int, int]]:
    hour = int(match.group(1))
    return clock(hour, 0, match.group(2)) if 1 <= hour <= 12 else [match.span()]


def _date(month: int, day: int, year_text: str | None, *, day_first: bool) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    name = MONTHS[month - 1]
    said = f"the {ordinal(day)} of {name}" if day_first else f"{name} {ordinal(day)}"
    if year_text:
        number = int(year_text) + (2000 if len(year_text) == 2 else 0)
        said += f" {year(number)}" if day_first else f", {year(number)}"
    return said


def iso_date(match: re.Match[str]) -> str | list[tuple[int, int]]:
    said = _date(int(match.group(2)), int(match.group(3)), match.group(1), day_first=False)
    return said if said else [match.span()]


def slashed_date(match: re.Match[str]) -> str | list[tuple[int, int]]:
    first, second = int(match.group(1)), int(match.group(2))
    day_first = first > 12  # US month/day unless the first cannot be a month (15/03/2024)
    month, day = (second, first) if day_first else (first, second)
    said = _date(month, day, match.group(3), day_first=day_first)
    return said if said else [match.span()]


def _month(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.lower().startswith(name[:3].lower()))


def month_day(match: re.Match[str]) -> str:
    said = _date(_month(match.group(1)), int(match.group(2)), match.group(3), day_first=False)
    return said or match.group()


def day_month(match: re.Match[str]) -> str:
    said = _date(_month(match.group(2)), int(match.group(1)), match.group(3), day_first=True)
    return said or match.group()


def phone(match: re.Match[str]) -> str:
    text = match.group()
    groups = re.findall(r"\d+", text)
    return ("plus " if text.startswith("+") else "") + ", ".join(digits(g) for g in groups)


def _host_part(part: str) -> str:
    low = part.lower()
    if low in HOST_PARTS:
        return HOST_PARTS[low]
    if part.isdigit():
        return cardinal(int(part)) if len(part) <= 4 else digits(part)
    if part.isalpha() and len(part) <= 4 and not set(low) & _VOWELS:
        return part.upper()  # "npm", "ftp": no vowel, no word: spelled
    return part.replace("-", " dash ")


def _path_part(part: str) -> str:
    words = re.split(r"([._-])", part)
    names = {".": "dot", "_": "underscore", "-": "dash"}
    return " ".join(names.get(w, w) for w in words if w)


def url(match: re.Match[str]) -> str:
    text = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", "", match.group())
    text = re.split(r"[?#]", text, maxsplit=1)[0].rstrip("/")
    host, _, path = text.partition("/")
    host = host.split("@")[-1].split(":")[0]
    said = " dot ".join(_host_part(p) for p in host.split(".") if p)
    for segment in path.split("/") if path else ():
        if segment:
            said += f" slash {_path_part(segment)}"
    return said


def email(match: re.Match[str]) -> str:
    local, _, host = match.group().partition("@")
    names = {".": "dot", "_": "underscore", "-": "dash", "+": "plus"}
    spoken = " ".join(names.get(w, w) for w in re.split(r"([._+-])", local) if w)
    return f"{spoken} at " + " dot ".join(_host_part(p) for p in host.split("."))


def file_name(match: re.Match[str]) -> str:
    stem, ext = match.group(1), match.group(2)
    stem = stem.lower() if stem.isupper() else stem  # "README": a word, not letters to spell
    return f"{stem.replace('_', ' ').replace('-', ' ')} dot {EXTENSIONS.get(ext.lower(), ext)}"


def version(match: re.Match[str]) -> str:
    parts = match.group(2).split(".")
    prefix = "version " if match.group(1) else ""
    if not prefix and len(parts) == 4 and all(p.isdigit() and int(p) <= 255 for p in parts):
        return " dot ".join(cardinal(int(p)) for p in parts)  # an IPv4 address
    return prefix + " point ".join(cardinal(int(p)) for p in parts)


FRACTIONS = {(1, 2): "one half", (1, 4): "one quarter", (3, 4): "three quarters", (1, 3): "one third",
             (2, 3): "two thirds"}
UNICODE_FRACTIONS = {"½": "one half", "¼": "one quarter", "¾": "three quarters", "⅓": "one third",
                     "⅔": "two thirds", "⅛": "one eighth", "⅜": "three eighths", "⅝": "five eighths",
                     "⅞": "seven eighths"}


def fraction(match: re.Match[str]) -> str:
    top, bottom = int(match.group(1)), int(match.group(2))
    if (top, bottom) == (24, 7):
        return "twenty four seven"
    if (top, bottom) in FRACTIONS:
        return FRACTIONS[(top, bottom)]
    if 0 < top < bottom <= 16:
        denominator = ordinal(bottom)
        return f"{cardinal(top)} {denominator}{'s' if top > 1 else ''}"
    return f"{cardinal(top)} out of {cardinal(bottom)}"


def long_digits(match: re.Match[str]) -> str:
    return digit_groups(match.group())
