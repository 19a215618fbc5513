"""Template snapshots: reviewed baselines, stable against source edits, loud on infra edits."""

from __future__ import annotations

import json
from pathlib import Path

from infra_support import STACK_NAMES, Synthesized

from infra.snapshot import ACCEPT_COMMAND, ASSET_HASH_PLACEHOLDER, accept, compare, normalize, report


def test_templates_match_the_baselines(default_synth: Synthesized) -> None:
    diffs = compare(default_synth.templates)
    assert not diffs, report(diffs)


def test_unreviewed_change_is_reported_with_a_diff_and_the_accept_command(override_synth: Synthesized) -> None:
    diffs = compare(override_synth.templates)
    assert {d.stack for d in diffs} == {"KokoroTtsEndpoint"}
    text = report(diffs)
    assert '-            "InstanceType": "ml.g5.xlarge",' in text
    assert '+            "InstanceType": "ml.m5.xlarge",' in text
    (summary,) = [line for line in text.splitlines() if line.startswith("[~] Resource EndpointConfig")]
    assert summary.startswith("[~] Resource EndpointConfig (AWS::SageMaker::EndpointConfig): ")
    assert "Properties.ProductionVariants[0].InstanceType" in summary
    assert ACCEPT_COMMAND in text


def test_source_changes_do_not_move_the_snapshot(default_synth: Synthesized) -> None:
    """An image rebuilt from edited source only changes the asset hash, which is normalized."""
    template = default_synth.templates["KokoroTtsEndpoint"]
    edited = json.loads(json.dumps(template).replace(_image_tag(default_synth), "f" * 64))
    assert edited != template
    assert normalize(edited) == normalize(template)
    assert ASSET_HASH_PLACEHOLDER in json.dumps(normalize(template))


def test_cdk_bookkeeping_is_ignored() -> None:
    template = {
        "Resources": {
            "CDKMetadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:x"}},
            "Bucket": {"Type": "AWS::S3::Bucket", "Metadata": {"aws:cdk:path": "S/Bucket/Resource"}},
        },
        "Conditions": {"CDKMetadataAvailable": {"Fn::Equals": ["a", "a"]}},
    }
    assert normalize(template) == {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}}}


def test_accept_then_compare_round_trip(default_synth: Synthesized, override_synth: Synthesized,
                                       tmp_path: Path) -> None:
    accept(override_synth.templates, tmp_path)
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(STACK_NAMES)
    assert compare(override_synth.templates, tmp_path) == []
    assert [d.stack for d in compare(default_synth.templates, tmp_path)] == ["KokoroTtsEndpoint"]
    (tmp_path / "OldStack.json").write_text("{}")
    assert "OldStack" in {d.stack for d in compare(override_synth.templates, tmp_path)}


def _image_tag(synth: Synthesized) -> str:
    (image,) = synth.assets["KokoroTtsEndpoint"]["dockerImages"].values()
    return str(next(iter(image["destinations"].values()))["imageTag"])
