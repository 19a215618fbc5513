"""`teardown` against moto: versioned buckets, missing stacks, confirmation, asset images."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from clitest_support import (
    AGENT_IMAGE_TAG,
    ASSET_REPO,
    CACHE_BUCKET,
    LOG_BUCKET,
    TTS_IMAGE_TAG,
    deploy_agent_runtime,
    deploy_endpoint,
    deploy_foundation,
    deploy_model_cache,
    image_tags,
    push_image,
    session,
    stack_names,
)
from typer.testing import CliRunner

from cli import deploy_agent, deploy_tts

if TYPE_CHECKING:
    from conftest import AwsEnv  # the fixtures' types

runner = CliRunner()


def _versioned_cache_with_history() -> int:
    s3 = session().client("s3")
    s3.put_bucket_versioning(Bucket=CACHE_BUCKET, VersioningConfiguration={"Status": "Enabled"})
    for body in (b"v1", b"v2", b"v3"):
        s3.put_object(Bucket=CACHE_BUCKET, Key="models/kokoro-82m/r/config.json", Body=body)
    s3.put_object(Bucket=CACHE_BUCKET, Key="models/kokoro-82m/r/voices/x.pt", Body=b"x")
    s3.delete_object(Bucket=CACHE_BUCKET, Key="models/kokoro-82m/r/voices/x.pt")  # delete marker
    return 5


def _remaining_versions(bucket: str) -> int:
    s3 = session().client("s3")
    try:
        resp = s3.list_object_versions(Bucket=bucket)
    except s3.exceptions.NoSuchBucket:
        return 0
    return len(resp.get("Versions", [])) + len(resp.get("DeleteMarkers", []))


def test_teardown_all_empties_versioned_bucket_and_deletes_stacks(aws: AwsEnv) -> None:
    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint()
    versions = _versioned_cache_with_history()
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 0, result.output
    assert f"s3://{CACHE_BUCKET}: deleted ({versions} object version(s) removed first)" in result.output
    assert _remaining_versions(CACHE_BUCKET) == 0
    assert stack_names() == set()
    order = [result.output.index(f"{name}: deleted")
             for name in ("KokoroTtsEndpoint", "KokoroTtsModelCache", "KokoroTtsFoundation")]
    assert order == sorted(order)  # reverse of the deploy order
    # What it cannot know is ours: CDK's own garbage collector, listing only.
    assert ("npx --yes aws-cdk@2.1148.0 gc aws://123456789012/us-east-1 --unstable=gc --type=all --action=print"
            in " ".join(result.output.split()))


def test_teardown_default_keeps_cache_and_foundation(aws: AwsEnv) -> None:
    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint()
    result = runner.invoke(deploy_tts.app, ["teardown", "--yes"])
    assert result.exit_code == 0, result.output
    assert stack_names() == {"KokoroTtsFoundation", "KokoroTtsModelCache"}
    assert "--all" in result.output


def test_teardown_is_a_noop_when_nothing_is_deployed(aws: AwsEnv) -> None:
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 0, result.output
    assert "Nothing to tear down" in result.output
    again = runner.invoke(deploy_agent.app, ["teardown", "--yes"])
    assert again.exit_code == 0 and "Nothing to tear down" in again.output


def test_teardown_half_deployed_skips_missing_stacks(aws: AwsEnv) -> None:
    deploy_foundation()
    deploy_model_cache()  # the endpoint never got deployed
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 0, result.output
    assert "KokoroTtsEndpoint: not deployed, nothing to delete" in result.output
    assert stack_names() == set()


@pytest.mark.parametrize("answer", ["n\n", ""])
def test_teardown_refuses_without_yes(aws: AwsEnv, answer: str) -> None:
    deploy_endpoint()
    result = runner.invoke(deploy_tts.app, ["teardown"], input=answer)
    assert result.exit_code != 0
    assert "Aborted: nothing was deleted" in result.output
    assert "Traceback" not in result.output
    assert stack_names() == {"KokoroTtsEndpoint"}


def test_teardown_confirms_with_y(aws: AwsEnv) -> None:
    deploy_endpoint()
    result = runner.invoke(deploy_tts.app, ["teardown"], input="y\n")
    assert result.exit_code == 0, result.output
    assert stack_names() == set()


def test_tts_teardown_refuses_while_agent_is_deployed(aws: AwsEnv) -> None:
    deploy_endpoint()
    deploy_agent_runtime()
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 1
    assert "KokoroAgentRuntime is still deployed" in result.output and "deploy-agent teardown" in result.output
    assert stack_names() == {"KokoroTtsEndpoint", "KokoroAgentRuntime"}


def test_delete_images_removes_only_images_of_deleted_stacks(aws: AwsEnv) -> None:
    deploy_endpoint()
    deploy_agent_runtime()
    for tag in (TTS_IMAGE_TAG, AGENT_IMAGE_TAG, "c" * 64):
        push_image(tag)
    agent = runner.invoke(deploy_agent.app, ["teardown", "--yes", "--delete-images"])
    assert agent.exit_code == 0, agent.output
    assert f"{ASSET_REPO}: 1 image(s) deleted, 0 already gone" in agent.output
    assert image_tags() == {TTS_IMAGE_TAG, "c" * 64}  # the TTS image and an unrelated one stay
    tts = runner.invoke(deploy_tts.app, ["teardown", "--yes", "--delete-images"])
    assert tts.exit_code == 0, tts.output
    assert image_tags() == {"c" * 64}


def test_delete_images_when_repository_is_gone(aws: AwsEnv) -> None:
    deploy_agent_runtime()
    result = runner.invoke(deploy_agent.app, ["teardown", "--yes", "--delete-images"])
    assert result.exit_code == 0, result.output
    assert "repository not found, nothing to delete" in result.output


def test_agent_teardown_is_idempotent(aws: AwsEnv) -> None:
    deploy_agent_runtime()
    first = runner.invoke(deploy_agent.app, ["teardown", "--yes"])
    assert first.exit_code == 0 and "KokoroAgentRuntime: deleted" in first.output
    second = runner.invoke(deploy_agent.app, ["teardown", "--yes"])
    assert second.exit_code == 0 and "Nothing to tear down" in second.output


def _inventory() -> dict[str, object]:
    """Everything of this app that outlives CloudFormation in moto: stacks, buckets, run-time log
    groups, asset images. (SageMaker and scaling resources are CloudFormation's to delete; moto's
    stand-in stacks here do not own them, so they are not listed.)"""
    s3, logs = session().client("s3"), session().client("logs")
    groups = [g["logGroupName"] for g in logs.describe_log_groups(logGroupNamePrefix="/aws/")["logGroups"]]
    return {
        "stacks": stack_names(),
        "buckets": {b["Name"] for b in s3.list_buckets()["Buckets"]} & {CACHE_BUCKET, LOG_BUCKET},
        "log groups": set(groups),
        "images": image_tags(),
    }


def test_teardown_all_leaves_nothing_behind(aws: AwsEnv) -> None:
    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint(autoscaling=True)
    versions = _versioned_cache_with_history()
    session().client("s3").put_object(Bucket=LOG_BUCKET, Key="model-bucket/2026-12-01", Body=b"GET ...")
    logs = session().client("logs")
    for group in ("/aws/sagemaker/Endpoints/kokoro-tts",
                  "/aws/bedrock-agentcore/runtimes/kokoro_voice_agent-a1B2c3-DEFAULT",
                  "/aws/sagemaker/Endpoints/kokoro-tts-prod"):  # the last belongs to another endpoint
        logs.create_log_group(logGroupName=group)
    for tag in (TTS_IMAGE_TAG, "c" * 64):  # "c...": another app's image in the shared asset repository
        push_image(tag)
    before = _inventory()
    assert before["stacks"] and before["buckets"] == {CACHE_BUCKET, LOG_BUCKET}

    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 0, result.output
    assert _inventory() == {
        "stacks": set(), "buckets": set(), "images": {"c" * 64},
        "log groups": {"/aws/sagemaker/Endpoints/kokoro-tts-prod"},
    }
    for line in (f"s3://{CACHE_BUCKET}: deleted ({versions} object version(s) removed first)",
                 f"s3://{LOG_BUCKET}: deleted (1 object version(s) removed first)",
                 "log group /aws/sagemaker/Endpoints/kokoro-tts: deleted",
                 "log group /aws/bedrock-agentcore/runtimes/kokoro_voice_agent-a1B2c3-DEFAULT: deleted",
                 f"{ASSET_REPO}: 1 image(s) deleted"):
        assert line in result.output, line


def test_teardown_all_finds_runtime_log_groups_under_the_deployed_runtime_name(aws: AwsEnv) -> None:
    """The foundation's AgentRuntimeName output names the runtime, whatever agentRuntimeName was."""
    deploy_foundation(runtime_name="voice_prod")
    logs = session().client("logs")
    for group in ("/aws/bedrock-agentcore/runtimes/voice_prod-Zx9-DEFAULT",
                  "/aws/bedrock-agentcore/runtimes/other_agent-Q1-DEFAULT"):
        logs.create_log_group(logGroupName=group)
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 0, result.output
    left = {g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]}
    assert left == {"/aws/bedrock-agentcore/runtimes/other_agent-Q1-DEFAULT"}


def test_keep_model_cache_keeps_the_cache_and_removes_the_rest(aws: AwsEnv) -> None:
    deploy_foundation()
    deploy_model_cache()
    deploy_endpoint()
    push_image(TTS_IMAGE_TAG)
    session().client("logs").create_log_group(logGroupName="/aws/sagemaker/Endpoints/kokoro-tts")
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--keep-model-cache", "--yes"])
    assert result.exit_code == 0, result.output
    assert _inventory() == {"stacks": {"KokoroTtsFoundation", "KokoroTtsModelCache"},
                            "buckets": {CACHE_BUCKET, LOG_BUCKET}, "images": set(), "log groups": set()}
    assert "Kept KokoroTtsModelCache and KokoroTtsFoundation (--keep-model-cache)" in result.output


def test_teardown_reports_what_it_could_not_delete(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    deploy_foundation()
    deploy_model_cache()
    # A bucket that cannot be emptied: S3 refuses deletes on an object under legal hold.
    s3 = session().client("s3")
    s3.delete_bucket(Bucket=LOG_BUCKET)
    s3.create_bucket(Bucket=LOG_BUCKET, ObjectLockEnabledForBucket=True)
    s3.put_object(Bucket=LOG_BUCKET, Key="held", Body=b"x", ObjectLockLegalHoldStatus="ON")
    result = runner.invoke(deploy_tts.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 1
    assert f"Could not delete s3://{LOG_BUCKET}" in result.output
    assert "Teardown left 1 resource(s) behind" in result.output
    assert f"s3://{CACHE_BUCKET}: deleted" in result.output  # one failure does not stop the rest


def test_agent_teardown_all_removes_its_log_groups_and_image(aws: AwsEnv) -> None:
    deploy_endpoint()
    deploy_agent_runtime()
    push_image(AGENT_IMAGE_TAG)
    push_image(TTS_IMAGE_TAG)
    logs = session().client("logs")
    runtime_group = "/aws/bedrock-agentcore/runtimes/kokoro_voice_agent-a1B2c3-DEFAULT"
    logs.create_log_group(logGroupName=runtime_group)
    result = runner.invoke(deploy_agent.app, ["teardown", "--all", "--yes"])
    assert result.exit_code == 0, result.output
    assert f"log group {runtime_group}: deleted" in result.output
    assert image_tags() == {TTS_IMAGE_TAG}  # the TTS stack still uses its image
    assert _inventory()["log groups"] == set()
    assert stack_names() == {"KokoroTtsEndpoint"}
