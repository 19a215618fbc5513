"""The account and Region preflight checks (cli/aws_checks.py, cli/preflight.py, cli/bedrock.py).

moto answers where it implements the API (SSM, CloudFormation, AgentCore control); moto 5.2's
Service Quotas knows only the vpc service and it has no Bedrock control-plane profiles, so those
are a botocore Stubber fed with the response shapes of AWS's API references (ListServiceQuotas,
GetInferenceProfile, GetFoundationModel).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from conftest import AwsEnv

from cli import aws_checks, bedrock, preflight
from cli.aws import AwsTarget, make_target

REGION = "us-east-1"


def _quota(name: str, value: float, code: str = "L-EXAMPLE1") -> dict[str, Any]:
    """A ServiceQuota as the ListServiceQuotas API reference documents it."""
    return {"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaCode": code,
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:123456789012:sagemaker/{code}",
            "QuotaName": name, "Value": value, "Unit": "None", "Adjustable": True, "GlobalQuota": False}


def _stubbed(service: str) -> tuple[AwsTarget, Stubber]:
    session = boto3.Session(aws_access_key_id="k", aws_secret_access_key="s", region_name=REGION)
    target = AwsTarget(session=session, region=REGION, profile=None)
    stub = Stubber(target.client(service))
    stub.activate()
    return target, stub


def _quota_check(value: float | None, *, min_instances: int = 1, max_instances: int = 2,
                 defaults: list[dict[str, Any]] | None = None) -> Any:
    target, stub = _stubbed("service-quotas")
    quotas = [_quota("ml.g5.2xlarge for endpoint usage", 4, "L-OTHER")]
    if value is not None:
        quotas.append(_quota("ml.g5.xlarge for endpoint usage", value))
    stub.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "sagemaker"})
    if defaults is not None:  # the type is not in the list: the defaults are read next
        stub.add_response("list_aws_default_service_quotas", {"Quotas": defaults}, {"ServiceCode": "sagemaker"})
    return aws_checks.check_endpoint_quota(target=target, instance_type="ml.g5.xlarge",
                                           min_instances=min_instances, max_instances=max_instances)


def test_a_new_account_with_quota_zero_is_told_the_exact_request() -> None:
    check = _quota_check(0.0)
    assert not check.ok and "cannot start (ResourceLimitExceeded)" in check.detail
    assert ("aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code L-EXAMPLE1 "
            "--desired-value 3 --region us-east-1") in check.hint


def test_a_quota_that_fits_the_fleet_but_not_an_update_fails_with_both_fixes() -> None:
    check = _quota_check(2.0)  # maxInstances 2: an update needs 2 + a batch of 1
    assert not check.ok and "needs 3" in check.detail and "roll back" in check.detail
    assert "--desired-value 3" in check.hint and "--max-instances 1" in check.hint


def test_a_quota_that_fits_updates_passes() -> None:
    check = _quota_check(3.0)
    assert check.ok and "updates need 3" in check.detail


def test_an_instance_type_the_region_lacks_is_named() -> None:
    check = _quota_check(None, defaults=[])
    assert not check.ok and "offers no ml.g5.xlarge endpoints" in check.detail


def _omitted_quota(applied: float | None, default: float = 2.0) -> Any:
    """ListServiceQuotas without the type (its applied value unavailable); AWS's defaults have it."""
    target, stub = _stubbed("service-quotas")
    name, service = "ml.g5.xlarge for endpoint usage", {"ServiceCode": "sagemaker"}
    stub.add_response("list_service_quotas", {"Quotas": [_quota("ml.g5.2xlarge for endpoint usage", 4, "L-OTHER")]},
                      service)
    stub.add_response("list_aws_default_service_quotas", {"Quotas": [_quota(name, default)]}, service)
    codes = {"ServiceCode": "sagemaker", "QuotaCode": "L-EXAMPLE1"}
    if applied is None:
        stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value", expected_params=codes)
        stub.add_response("get_aws_default_service_quota", {"Quota": _quota(name, default)}, codes)
    else:
        stub.add_response("get_service_quota", {"Quota": _quota(name, applied)}, codes)
    check = aws_checks.check_endpoint_quota(target=target, instance_type="ml.g5.xlarge", min_instances=1,
                                            max_instances=2)
    stub.assert_no_pending_responses()
    return check


def test_a_quota_the_list_omits_is_read_with_get_service_quota() -> None:
    check = _omitted_quota(applied=4.0)
    assert check.ok, check.detail
    assert "is 4 (applied value, from GetServiceQuota (ListServiceQuotas omitted it))" in check.detail


def test_without_an_applied_value_the_aws_default_decides_and_is_named() -> None:
    check = _omitted_quota(applied=None, default=2.0)
    assert not check.ok and "needs 3" in check.detail
    assert "is 2 (AWS default value, from GetAWSDefaultServiceQuota: no applied value is available)" in check.detail
    assert "--quota-code L-EXAMPLE1 --desired-value 3" in check.hint


def test_a_quota_check_that_cannot_run_does_not_block() -> None:
    target, stub = _stubbed("service-quotas")
    stub.add_client_error("list_service_quotas", "AccessDeniedException", "not allowed")
    check = aws_checks.check_endpoint_quota(target=target, instance_type="ml.g5.xlarge", min_instances=1,
                                            max_instances=2)
    assert check.ok and check.detail.startswith("not checked")


def test_a_missing_inference_profile_is_named_with_the_fix() -> None:
    target, stub = _stubbed("bedrock")
    stub.add_client_error("get_inference_profile", "ResourceNotFoundException", "not found",
                          expected_params={"inferenceProfileIdentifier": "eu.anthropic.x-v1:0"})
    check = aws_checks.check_bedrock_model_id(target=target, model="eu.anthropic.x-v1:0")
    assert not check.ok and "no inference profile eu.anthropic.x-v1:0 in us-east-1" in check.detail
    assert "list-inference-profiles --region us-east-1" in check.hint


def test_an_existing_inference_profile_passes() -> None:
    target, stub = _stubbed("bedrock")
    stub.add_response("get_inference_profile", {
        "inferenceProfileName": "US Claude", "inferenceProfileArn": "arn:aws:bedrock:us-east-1:1:inference-profile/x",
        "inferenceProfileId": "us.anthropic.x-v1:0", "status": "ACTIVE", "type": "SYSTEM_DEFINED",
        "models": [{"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/anthropic.x-v1:0"}]})
    assert aws_checks.check_bedrock_model_id(target=target, model="us.anthropic.x-v1:0").ok


def test_the_bidi_probe_never_blocks() -> None:
    target, _ = _stubbed("sts")

    def refused(host: str, port: int) -> None:
        assert (host, port) == ("runtime.sagemaker.us-east-1.amazonaws.com", 8443)
        raise ConnectionRefusedError

    check = aws_checks.check_bidi_streaming_region(target=target, connect=refused)
    assert check.ok and check.detail.startswith("not confirmed")
    reached = aws_checks.check_bidi_streaming_region(target=target, connect=lambda h, p: None).detail
    assert "8443 accepts connections; proven: a TCP connection only" in reached
    assert "not that the API serves this account" in reached


def test_agentcore_answers_in_the_region(aws: AwsEnv) -> None:
    """moto implements the AgentCore control plane's ListAgentRuntimes."""
    assert aws_checks.check_agentcore_region(target=make_target(profile=None, region=REGION)).ok


def test_bootstrap_is_looked_up_under_the_qualifier_infra_uses(aws: AwsEnv) -> None:
    from infra.defaults import bootstrap_qualifier

    target = make_target(profile=None, region=REGION)
    missing = preflight.check_bootstrap(target=target, account="123456789012")
    assert not missing.ok and f"/cdk-bootstrap/{bootstrap_qualifier()}/version" in missing.detail
    target.client("ssm").put_parameter(Name=f"/cdk-bootstrap/{bootstrap_qualifier()}/version", Value="30",
                                       Type="String")
    assert preflight.check_bootstrap(target=target, account="123456789012").ok


def test_the_access_hint_points_at_the_model_catalog_not_the_retired_page() -> None:
    hint = bedrock.access_hint("us.anthropic.claude-haiku-4-5-20251001-v1:0", "us-east-1")
    assert "#/model-catalog" in hint and "modelaccess" not in hint
    assert "use-case form" in hint and "aws-marketplace:Subscribe" in hint


def test_the_first_call_fails_the_preflight_on_access_denied() -> None:
    class Runtime:
        def converse_stream(self, **kwargs: Any) -> dict[str, Any]:
            from botocore.exceptions import ClientError

            assert kwargs["inferenceConfig"] == {"maxTokens": 1}
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "Model access is denied "
                               "due to IAM user or service role is not authorized to perform the required AWS "
                               "Marketplace actions"}}, "ConverseStream")

    target, _ = _stubbed("sts")
    target._clients["bedrock-runtime"] = Runtime()
    check = bedrock.check_first_call(target=target, model="us.anthropic.x-v1:0")
    assert not check.ok and "AWS Marketplace" in check.detail and "#/model-catalog" in check.hint


@pytest.mark.parametrize(("quota", "largest"), [(0, 0), (1, 0), (2, 1), (3, 2), (5, 3), (15, 10)])
def test_largest_max_instances_a_quota_allows(quota: int, largest: int) -> None:
    assert aws_checks.largest_fitting_max(quota) == largest


def test_the_deployed_agent_skips_its_start_up_call_after_deploy_agent_made_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """One model call per deploy (deploy-agent's), none per AgentCore session microVM."""
    from voice_agent.config import load_config
    from voice_agent.model_check import CHECKED_ENV, check_bedrock_model

    class NoCalls:
        def converse_stream(self, **kwargs: Any) -> dict[str, Any]:
            raise AssertionError("the start-up check called Bedrock although the deploy had")

    config = load_config(env={"AGENT_MODEL": "bedrock", "BEDROCK_MODEL_ID": "us.anthropic.x-v1:0",
                              "AWS_REGION": REGION}, credentials_probe=lambda: True)
    monkeypatch.setenv(CHECKED_ENV, "deploy-agent")
    check_bedrock_model(config, client=NoCalls())
