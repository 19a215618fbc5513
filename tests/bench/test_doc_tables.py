"""The benchmark tables in README and docs are what ``bench.tables`` renders from the committed
results: a figure edited by hand, or a results file committed without ``make docs-tables``, fails
here. The other tests check the generator's rules on a scratch copy, never on the real docs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import tables

REPO = Path(__file__).resolve().parents[2]


def test_committed_docs_agree_with_committed_results() -> None:
    assert tables.stale(REPO) == [], "run `make docs-tables` and commit what it rewrites"


def test_every_table_is_used_in_a_doc() -> None:
    used = {name for doc in tables.DOCS for name in tables.OPENING.findall((REPO / doc).read_text())}
    assert used == set(tables.BY_NAME), "a table in the registry that no doc shows is dead code"


def _scratch(tmp_path: Path) -> Path:
    """A repository-shaped copy: the generated docs and the results they read."""
    for doc in tables.DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / doc, tmp_path / doc)
    shutil.copytree(REPO / tables.RESULTS, tmp_path / tables.RESULTS,
                    ignore=shutil.ignore_patterns("*.png", "traces.json"))
    return tmp_path


def test_a_hand_edit_is_found_and_rewritten(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    readme = root / "README.md"
    region = next((m for m in tables.REGION.finditer(readme.read_text()) if m.group(2) == "headline"), None)
    assert region is not None
    readme.write_text(readme.read_text().replace(region.group(3), region.group(3).replace("|", "| 1", 1)))
    assert tables.stale(root) == ["README.md"]
    assert tables.write(root) == ["README.md"]
    assert tables.stale(root) == []


def test_a_new_result_changes_the_table_and_the_check_fails(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    path = root / tables.RESULTS / "capacity.json"
    record = json.loads(path.read_text())
    record["capacity"]["sessions"] += 3
    path.write_text(json.dumps(record))
    assert "README.md" in tables.stale(root) and "docs/benchmarks.md" in tables.stale(root)


def test_unknown_or_unclosed_regions_are_refused(tmp_path: Path) -> None:
    results = REPO / tables.RESULTS
    with pytest.raises(ValueError, match="no table named nonesuch"):
        tables.regenerate("<!-- generated:nonesuch -->\nx\n<!-- /generated:nonesuch -->\n", results)
    with pytest.raises(ValueError, match="no closing"):
        tables.regenerate("<!-- generated:soak -->\nx\n", results)


def test_a_region_is_filled_from_its_registry_entry() -> None:
    doc = "before\n<!-- generated:speeds -->\nstale\n<!-- /generated:speeds -->\nafter\n"
    out = tables.regenerate(doc, REPO / tables.RESULTS)
    assert out.startswith("before\n<!-- generated:speeds -->\n| speed |") and out.endswith(
        "<!-- /generated:speeds -->\nafter\n")
    assert "stale" not in out
