"""docs/architecture.md names every module of each deployable, and nothing that does not exist.

Each ``### ...: `<folder>/` `` section's table lists that folder's modules (paths relative to it);
a module added without a line there, or a line left after its module went, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
SECTION = re.compile(r"^### [^`\n]*`([^`]+/)`\s*$", re.MULTILINE)
ROW = re.compile(r"^\| `([^`]+\.py)` \|", re.MULTILINE)
DEPLOYABLES = ("voicestream/src/voicestream/", "containers/kokoro/kokoro_server/",
               "containers/kokoro/kokoro_tools/", "agent/voice_agent/")


def documented() -> dict[str, set[str]]:
    text = DOC.read_text()
    heads = list(SECTION.finditer(text))
    tables: dict[str, set[str]] = {}
    for head, following in zip(heads, heads[1:] + [None]):
        body = text[head.end():following.start() if following else len(text)]
        tables[head.group(1)] = set(ROW.findall(body))
    return tables


def test_every_deployable_has_a_table() -> None:
    assert set(documented()) == set(DEPLOYABLES)


def test_each_table_names_exactly_the_modules_its_folder_holds() -> None:
    for folder, rows in documented().items():
        modules = {str(p.relative_to(REPO / folder)) for p in (REPO / folder).rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert sorted(modules - rows) == [], f"{folder}: modules missing from docs/architecture.md"
        assert sorted(rows - modules) == [], f"{folder}: docs/architecture.md names modules that do not exist"
