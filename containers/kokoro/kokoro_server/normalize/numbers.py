"""Numbers as words, the way an American reader says them (num2words, misaki's own dependency).

num2words writes British-style "one hundred and five" and "forty-two"; a US listener hears "one
hundred five", "forty two": the "and", the commas and the hyphens are dropped.
"""

from __future__ import annotations

from num2words import num2words

# num2words raises from about 307 digits; longer (or long-decimal) numbers are read in groups.
MAX_CARDINAL_DIGITS = 15
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _plain(words: str) -> str:
    return " ".join(words.replace(",", " ").replace("-", " ").replace(" and ", " ").split())


def cardinal(number: int) -> str:
    """12 -> "twelve"; a number too long to name is read digit by digit, in groups of three."""
    if len(str(abs(number))) > MAX_CARDINAL_DIGITS:
        return ("minus " if number < 0 else "") + digit_groups(str(abs(number)))
    return _plain(num2words(number))


def ordinal(number: int) -> str:
    """3 -> "third", 22 -> "twenty second"."""
    if len(str(abs(number))) > MAX_CARDINAL_DIGITS:
        return cardinal(number)
    return _plain(num2words(number, to="ordinal"))


def year(number: int) -> str:
    """1999 -> "nineteen ninety nine", 2024 -> "twenty twenty four", 2005 -> "two thousand five"."""
    if 2000 <= number <= 2009 or number % 1000 == 0 or not 1000 <= number <= 9999:
        return cardinal(number)
    high, low = divmod(number, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    return f"{cardinal(high)} {'oh ' if low < 10 else ''}{cardinal(low)}"


def digits(text: str) -> str:
    """"4567" -> "four five six seven" (phone numbers, codes)."""
    return " ".join(DIGITS[int(c)] for c in text if c.isdigit())


def digit_groups(text: str, size: int = 3) -> str:
    """A long digit string read digit by digit, a comma (a pause) after each group of ``size``."""
    run = "".join(c for c in text if c.isdigit())
    groups = [run[i:i + size] for i in range(0, len(run), size)]
    return ", ".join(digits(g) for g in groups)


def decimal(text: str) -> str:
    """"3.14" -> "three point one four", "1,299" -> "one thousand two hundred ninety nine",
    ".5" -> "point five"; a "-" in front is "minus"."""
    sign = ""
    if text.startswith(("-", "−")):
        sign, text = "minus ", text[1:]
    whole, _, frac = text.replace(",", "").partition(".")
    spoken = cardinal(int(whole)) if whole else ""
    if frac:
        spoken = f"{spoken} point {digits(frac)}".strip()
    return sign + spoken

