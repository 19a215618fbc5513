"""The ``normalize`` option: which of the server's text normalization rules apply to a text.

The server rewrites what an LLM writes into what a person would read aloud before G2P (markdown,
URLs, money, dates...: docs/normalization.md). On by default. On the wire the option is one of:

* ``true`` (the default): every group on;
* ``false``: the text is spoken as written (only G2P's own reading);
* an object of group -> bool, e.g. ``{"urls": false}``: the groups named ``false`` are off, the
  rest on (``{"urls": false}`` keeps a URL spelled as written).

Unknown groups and non-bool values are refused, naming the field (``normalize.<group>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .fields import invalid

#: The rule groups a client may switch off one by one (the server's rules each belong to one).
NORMALIZE_GROUPS: Final = (
    "markdown", "urls", "emails", "money", "phones", "times", "dates", "units", "numbers",
    "abbreviations", "symbols", "emoji", "plurals",
)


@dataclass(frozen=True, kw_only=True)
class Normalization:
    """Which normalization groups apply: ``enabled`` False turns them all off; ``off`` names the
    groups turned off one by one."""

    enabled: bool = True
    off: frozenset[str] = frozenset()

    def on(self, group: str) -> bool:
        return self.enabled and group not in self.off

    def to_json(self) -> bool | dict[str, bool]:
        if not self.enabled:
            return False
        if not self.off:
            return True
        return {group: False for group in NORMALIZE_GROUPS if group in self.off}


#: Every rule on: what a request without ``normalize`` gets.
NORMALIZE_ALL: Final = Normalization()
#: Nothing rewritten: ``"normalize": false``.
NORMALIZE_NONE: Final = Normalization(enabled=False)


def check_normalization(value: object, *, name: str = "normalize") -> Normalization:
    """The option from its JSON value (bool, or an object of group -> bool); ProtocolError naming
    the field (``normalize`` or ``normalize.<group>``) otherwise."""
    if isinstance(value, bool):
        return NORMALIZE_ALL if value else NORMALIZE_NONE
    if not isinstance(value, dict):
        raise invalid(name, f"must be true, false or an object of group -> bool, got {type(value).__name__}")
    off = set()
    for group, on in value.items():
        if group not in NORMALIZE_GROUPS:
            raise invalid(f"{name}.{str(group)[:40]}", f"unknown group; expected one of {', '.join(NORMALIZE_GROUPS)}")
        if not isinstance(on, bool):
            raise invalid(f"{name}.{group}", f"must be true or false, got {type(on).__name__}")
        if not on:
            off.add(group)
    return Normalization(off=frozenset(off))
