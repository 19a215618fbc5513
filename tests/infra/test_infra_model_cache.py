"""Model-cache stack: encrypted, private, TLS-only buckets that survive stack deletion."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match, Template
from infra_support import MODEL_PREFIX, Synthesized, render

BLOCK_ALL = {"BlockPublicAcls": True, "BlockPublicPolicy": True,
             "IgnorePublicAcls": True, "RestrictPublicBuckets": True}


def _template(synth: Synthesized) -> Template:
    return Template.from_json(synth.templates["KokoroTtsModelCache"])


def test_buckets_are_encrypted_private_and_retained(default_synth: Synthesized) -> None:
    template = _template(default_synth)
    template.resource_count_is("AWS::S3::Bucket", 2)
    template.all_resources("AWS::S3::Bucket", {
        "Type": "AWS::S3::Bucket",
        "DeletionPolicy": "Retain",
        "UpdateReplacePolicy": "Retain",
        "Properties": Match.object_like({
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]},
            "PublicAccessBlockConfiguration": BLOCK_ALL,
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        }),
    })


def test_model_bucket_logs_to_the_log_bucket(default_synth: Synthesized) -> None:
    _template(default_synth).has_resource_properties("AWS::S3::Bucket", {
        "LoggingConfiguration": {"DestinationBucketName": {"Ref": Match.string_like_regexp("^AccessLogBucket")},
                                 "LogFilePrefix": "model-bucket/"},
    })


def test_every_bucket_denies_non_tls_requests(default_synth: Synthesized) -> None:
    resources = default_synth.templates["KokoroTtsModelCache"]["Resources"]
    buckets = {key for key, res in resources.items() if res["Type"] == "AWS::S3::Bucket"}
    ssl_only: set[str] = set()
    for resource in resources.values():
        if resource["Type"] != "AWS::S3::BucketPolicy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            if (statement["Effect"] == "Deny" and statement["Action"] == "s3:*"
                    and statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
                    and statement["Principal"] == {"AWS": "*"}):
                ssl_only.add(resource["Properties"]["Bucket"]["Ref"])
    assert ssl_only == buckets


def test_outputs_and_prefix(default_synth: Synthesized) -> None:
    outputs: dict[str, Any] = render(default_synth.templates["KokoroTtsModelCache"]["Outputs"])
    assert outputs["ModelPrefix"]["Value"] == MODEL_PREFIX
    assert outputs["BucketName"]["Value"] == "${ModelBucketB33D855B}"
    assert outputs["LogBucketName"]["Value"].startswith("${AccessLogBucket")


def test_incomplete_multipart_uploads_are_cleaned(default_synth: Synthesized) -> None:
    _template(default_synth).has_resource_properties("AWS::S3::Bucket", {
        "LifecycleConfiguration": {"Rules": Match.array_with([Match.object_like({
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}})])},
    })
