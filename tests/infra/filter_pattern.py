"""A matcher for the subset of CloudWatch Logs JSON filter patterns the stack deploys.

Our own simulator of CloudWatch's matching (it proves only our reading of the syntax): a pattern
is ``{ (CLAUSE) && (CLAUSE) ... }``, each clause ``$.field = "text"``, ``$.field = *`` (the field
exists) or ``$.field > NUMBER`` (a numeric field above the bound). Anything else is refused, so
a pattern outside that subset fails the test instead of being evaluated by a guess. A log event
that is not one whole JSON object matches nothing, as in CloudWatch.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PATTERN = re.compile(r"^\{ (?P<body>.+) \}$")
_CLAUSE = re.compile(r'^\(\$\.(?P<field>[A-Za-z_][A-Za-z0-9_]*) (?P<op>=|>) (?P<value>\*|"[^"*]*"|\d+)\)$')


def clauses(pattern: str) -> list[tuple[str, str | float | None]]:
    """(field, required text, a float lower bound (exclusive), or None for "exists") per clause;
    ValueError outside the subset."""
    match = _PATTERN.match(pattern)
    if match is None:
        raise ValueError(f"not a JSON filter pattern: {pattern!r}")
    parsed = []
    for raw in match.group("body").split(" && "):
        clause = _CLAUSE.match(raw)
        if clause is None:
            raise ValueError(f"clause outside the supported subset: {raw!r}")
        value, numeric = clause.group("value"), clause.group("op") == ">"
        if numeric != value.isdigit():
            raise ValueError(f"clause outside the supported subset: {raw!r}")
        parsed.append((clause.group("field"), float(value) if numeric else None if value == "*" else value[1:-1]))
    return parsed


def event(line: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(line)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def matches(pattern: str, line: str) -> bool:
    data = event(line)
    if data is None:
        return False
    for field, wanted in clauses(pattern):
        if field not in data:
            return False
        if isinstance(wanted, float):
            if not isinstance(data[field], int | float) or not data[field] > wanted:
                return False
        elif wanted is not None and data[field] != wanted:
            return False
    return True


def value(selector: str, line: str) -> float:
    """The metric value a transformation (``"1"`` or ``"$.field"``) takes from a matched line."""
    if not selector.startswith("$."):
        return float(selector)
    data = event(line)
    assert data is not None
    return float(data[selector[2:]])
