"""Write the benchmark tables of README and docs from the committed ``bench/results/*.json``.

Every figure a doc quotes from a benchmark sits between ``<!-- generated:NAME -->`` and
``<!-- /generated:NAME -->``; this module renders NAME from the results files and replaces what
is there, so a doc cannot drift from the record (``--check`` fails instead of writing, and
``tests/bench/test_doc_tables.py`` runs it). It also rewrites ``latest.md``, the tables of
``latest.json``, so that file too agrees with its record. ``make bench`` runs it after a run;
``make docs-tables`` runs it alone.

A new results file gets a table by one entry in :data:`TABLES` (a name, the files it reads, a
function from their parsed JSON to markdown lines) and the two markers in a doc.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import doc_tables as render
from . import doc_tables_speech as speech
from . import memory_trim

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path("bench/results")
#: The docs whose generated regions this module owns (relative to the repository root).
DOCS = ("README.md", "docs/benchmarks.md", "docs/protocol.md", "docs/models.md",
        "docs/integrations.md", "docs/normalization.md", "docs/throughput.md", "docs/languages.md")
REGION = re.compile(r"(<!-- generated:([a-z0-9-]+) -->\n)(.*?)(<!-- /generated:\2 -->)", re.DOTALL)
OPENING = re.compile(r"<!-- generated:([a-z0-9-]+) -->")



@dataclass(frozen=True, kw_only=True)
class Table:
    """One generated region: what it is called in the markers, and what it is made from."""

    name: str
    sources: tuple[str, ...]
    render: Callable[..., list[str]]

    def text(self, results_dir: Path) -> str:
        loaded = [json.loads((results_dir / name).read_text()) for name in self.sources]
        return "\n".join(self.render(*loaded)) + "\n"


TABLES: tuple[Table, ...] = (
    Table(name="headline", sources=("latest.json", "capacity.json", "codec_quality.json"), render=render.headline),
    Table(name="scenario", sources=("latest.json",), render=render.scenario),
    Table(name="targets", sources=("latest.json",), render=render.targets),
    Table(name="ttfa", sources=("latest.json",), render=render.ttfa),
    Table(name="arrivals", sources=("latest.json",), render=render.arrivals),
    *(Table(name=name, sources=(source,), render=functools.partial(render.paired_arrivals, source=source))
      for name, source in (("paired-arrivals", "overload/longest.json"),
                           ("paired-arrivals-dry", "overload/dry_floor.json"),
                           ("paired-arrivals-planner", "overload/floor_vs_planner.json"),
                           ("paired-arrivals-cut", "overload/cut_vs_before.json"))),
    Table(name="capacity", sources=("capacity.json",), render=render.capacity),
    Table(name="codec-quality", sources=("codec_quality.json",), render=render.codec_quality),
    Table(name="windowing", sources=("windowing.json",), render=render.windowing),
    Table(name="soak", sources=("soak.json",), render=render.soak),
    Table(name="speeds", sources=("speeds.json",), render=render.speeds),
    Table(name="speech-content", sources=("speech_content.json",), render=render.speech_content),
    Table(name="frameworks", sources=("frameworks.json",), render=render.frameworks),
    Table(name="normalization", sources=("normalization.json",), render=speech.normalization),
    Table(name="languages", sources=("languages.json",), render=speech.languages),
    Table(name="language-packages", sources=("languages.json",), render=speech.language_packages),
    Table(name="engine-vs-loop-torch", sources=("engine_vs_loop-torch.json",), render=speech.engine_vs_loop),
    Table(name="engine-vs-loop-onnx", sources=("engine_vs_loop-onnx.json",), render=speech.engine_vs_loop),
    Table(name="barge-in", sources=("barge_in-onnx.json", "barge_in-torch.json"), render=speech.barge_in),
    Table(name="side-by-side", sources=("side_by_side-torch.json",), render=speech.side_by_side),
    Table(name="side-by-side-dequantized", sources=("side_by_side-torch-dequantized.json",),
          render=functools.partial(speech.side_by_side, source="side_by_side-torch-dequantized.json")),
    Table(name="memory-trim", sources=("memory_trim.json",), render=memory_trim.table),
    Table(name="sentence-ttfa", sources=("sentence_ttfa-onnx.json",), render=speech.sentence_ttfa),
    Table(name="onnx-ops", sources=("onnx_ops.json",), render=speech.onnx_ops),
    Table(name="torch-layout", sources=("torch_layout-tiny.json", "torch_layout-dequantized.json"),
          render=speech.torch_layout),
)
BY_NAME = {table.name: table for table in TABLES}


def latest_md(results_dir: Path) -> str:
    """``latest.md`` as ``bench.run`` writes it, from ``latest.json`` alone."""
    from . import design, report

    results = json.loads((results_dir / "latest.json").read_text())
    text = report.markdown(results)
    return text + design.markdown(results["design"]) if "design" in results else text


def regenerate(doc: str, results_dir: Path) -> str:
    """``doc`` with every generated region rendered again; an unknown name is an error."""
    unknown = sorted(set(OPENING.findall(doc)) - set(BY_NAME))
    if unknown:
        raise ValueError(f"no table named {', '.join(unknown)} in bench.tables.TABLES")
    unclosed = sorted(set(OPENING.findall(doc)) - {m.group(2) for m in REGION.finditer(doc)})
    if unclosed:
        raise ValueError(f"generated region {', '.join(unclosed)} has no closing <!-- /generated:NAME -->")

    def fill(match: re.Match[str]) -> str:
        return match.group(1) + BY_NAME[match.group(2)].text(results_dir) + match.group(4)

    return REGION.sub(fill, doc)


def outputs(root: Path) -> dict[Path, str]:
    """Every file this module writes, with the text it should hold now."""
    results_dir = root / RESULTS
    wanted = {root / doc: regenerate((root / doc).read_text(), results_dir) for doc in DOCS}
    wanted[results_dir / "latest.md"] = latest_md(results_dir)
    return wanted


def stale(root: Path = REPO) -> list[str]:
    """The files (relative to ``root``) whose committed text disagrees with the results."""
    return [str(path.relative_to(root)) for path, text in outputs(root).items() if path.read_text() != text]


def write(root: Path = REPO) -> list[str]:
    """Rewrite what is stale; return what changed."""
    changed = []
    for path, text in outputs(root).items():
        if path.read_text() != text:
            path.write_text(text)
            changed.append(str(path.relative_to(root)))
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a doc disagrees")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for name in found:
            print(f"bench.tables: {name} disagrees with bench/results (run make docs-tables)", file=sys.stderr)
        return 1 if found else 0
    changed = write()
    print("bench.tables: " + (f"rewrote {', '.join(changed)}" if changed else "every table is current"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
