"""Template snapshots: an offline, Python stand-in for ``cdk diff --template``.

Each stack is synthesized with the cdk.json defaults, normalized, and compared with the
reviewed copy in infra/baselines/<Stack>.json. Normalization replaces whatever changes when only
container or agent *source* changes (asset hashes, which are image tags) and CDK bookkeeping, so
the baselines move only when the infrastructure does.

    .venv/bin/python -m infra.snapshot --check     # exit 1 and print the diff on a change
    .venv/bin/python -m infra.snapshot --accept    # review, then rewrite the baselines
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

BASELINE_DIR: Final = Path(__file__).resolve().parent / "baselines"
ACCEPT_COMMAND: Final = ".venv/bin/python -m infra.snapshot --accept"
ASSET_HASH_PLACEHOLDER: Final = "<ASSET_HASH>"

_ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
_DROPPED_RESOURCES: Final = frozenset({"CDKMetadata"})
_DROPPED_CONDITIONS: Final = frozenset({"CDKMetadataAvailable"})
_DROPPED_METADATA_PREFIXES: Final = ("aws:cdk:", "aws:asset:")


def normalize(template: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without source-dependent hashes and CDK bookkeeping (CLI-added metadata too)."""
    result: dict[str, Any] = _replace_hashes(json.loads(json.dumps(template)))
    resources = result.get("Resources", {})
    for logical_id in _DROPPED_RESOURCES & resources.keys():
        del resources[logical_id]
    for resource in resources.values():
        metadata = resource.get("Metadata")
        if isinstance(metadata, dict):
            for key in [k for k in metadata if k.startswith(_DROPPED_METADATA_PREFIXES)]:
                del metadata[key]
            if not metadata:
                del resource["Metadata"]
    conditions = result.get("Conditions", {})
    for name in _DROPPED_CONDITIONS & conditions.keys():
        del conditions[name]
    if "Conditions" in result and not conditions:
        del result["Conditions"]
    return result


def _replace_hashes(node: Any) -> Any:
    if isinstance(node, str):
        return _ASSET_HASH.sub(ASSET_HASH_PLACEHOLDER, node)
    if isinstance(node, list):
        return [_replace_hashes(item) for item in node]
    if isinstance(node, dict):
        return {key: _replace_hashes(value) for key, value in node.items()}
    return node


def render(template: Mapping[str, Any]) -> str:
    """The committed text form: sorted keys, so diffs are stable and readable."""
    return json.dumps(template, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True, kw_only=True)
class StackDiff:
    """How one stack's normalized template differs from its baseline."""

    stack: str
    summary: tuple[str, ...]
    unified: str

    def __str__(self) -> str:
        return "\n".join((f"Stack {self.stack}", *self.summary, self.unified))


def synthesize(context: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Synthesize all stacks (environment-agnostic) and return normalized templates by name."""
    from infra.app import build_app  # deferred: starting jsii is slow, --help should not wait

    with tempfile.TemporaryDirectory(prefix="kokoro-snapshot-") as outdir:
        built = build_app(context, outdir=outdir, use_default_environment=False)
        assembly = built.app.synth()
        return {stack.stack_name: normalize(assembly.get_stack_by_name(stack.stack_name).template)
                for stack in built.stacks}


def compare(templates: Mapping[str, Mapping[str, Any]],
            baseline_dir: Path = BASELINE_DIR) -> list[StackDiff]:
    """Differences between normalized templates and baselines (missing or stale files count)."""
    diffs: list[StackDiff] = []
    for stack, template in sorted(templates.items()):
        path = baseline_dir / f"{stack}.json"
        before = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        after = normalize(template)
        old_text = render(before) if path.exists() else ""
        new_text = render(after)
        if old_text == new_text:
            continue
        unified = "".join(difflib.unified_diff(
            old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
            fromfile=f"baselines/{stack}.json", tofile=f"synthesized/{stack}.json"))
        diffs.append(StackDiff(stack=stack, summary=_summarize(before, after), unified=unified))
    for path in sorted(baseline_dir.glob("*.json")):
        if path.stem not in templates:
            diffs.append(StackDiff(stack=path.stem, summary=("[-] stack no longer synthesized",),
                                   unified=""))
    return diffs


def _summarize(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    """cdk-diff-like lines: [+] added, [-] removed, [~] modified, per resource and output."""
    lines: list[str] = []
    for section in ("Resources", "Outputs", "Parameters", "Conditions"):
        old, new = before.get(section, {}), after.get(section, {})
        for key in sorted(old.keys() | new.keys()):
            kind = new.get(key, old.get(key, {})).get("Type", "") if section == "Resources" else ""
            label = f"{section[:-1]} {key}" + (f" ({kind})" if kind else "")
            if key not in old:
                lines.append(f"[+] {label}")
            elif key not in new:
                lines.append(f"[-] {label}")
            elif old[key] != new[key]:
                changed = _changed_paths(old[key], new[key])
                lines.append(f"[~] {label}: {', '.join(changed[:6])}"
                             + (" ..." if len(changed) > 6 else ""))
    return tuple(lines) if lines else ("[~] template-level change",)


def _changed_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        paths: list[str] = []
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                paths.extend(_changed_paths(old.get(key), new.get(key), f"{prefix}.{key}".lstrip(".")))
        return paths
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [path for index, (item_old, item_new) in enumerate(zip(old, new, strict=True))
                if item_old != item_new
                for path in _changed_paths(item_old, item_new, f"{prefix}[{index}]")]
    return [prefix or "(value)"]


def report(diffs: Sequence[StackDiff]) -> str:
    """Readable failure text: summaries, unified diffs, and how to accept."""
    body = "\n\n".join(str(diff) for diff in diffs)
    return (f"{len(diffs)} stack template(s) differ from infra/baselines:\n\n{body}\n"
            f"If the change is intended, review it and run: {ACCEPT_COMMAND}")


def accept(templates: Mapping[str, Mapping[str, Any]], baseline_dir: Path = BASELINE_DIR) -> list[Path]:
    """Write normalized templates as the new baselines and remove stale ones."""
    baseline_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stack, template in sorted(templates.items()):
        path = baseline_dir / f"{stack}.json"
        path.write_text(render(normalize(template)), encoding="utf-8")
        written.append(path)
    for path in baseline_dir.glob("*.json"):
        if path.stem not in templates:
            path.unlink()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.snapshot",
                                     description="Compare synthesized templates with infra/baselines.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report differences, exit 1 if any (default)")
    mode.add_argument("--accept", action="store_true", help="rewrite the baselines from a fresh synth")
    args = parser.parse_args(argv)

    templates = synthesize()
    if args.accept:
        for path in accept(templates):
            print(f"wrote {path.relative_to(BASELINE_DIR.parent.parent)}")
        return 0
    diffs = compare(templates)
    if diffs:
        print(report(diffs))
        return 1
    print(f"{len(templates)} stack templates match infra/baselines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
