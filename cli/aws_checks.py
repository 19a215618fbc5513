"""Account and Region checks the deploys run before any CloudFormation: each a ToolCheck with its fix.

What a first deploy on a new account would otherwise learn late, from a rolled-back stack: an
instance quota of 0 (or one that fits the fleet but not an update), a Region without AgentCore
Runtime, a Bedrock model or inference profile that does not exist there. A check that cannot run
(no permission for it, an API error) says "not checked" and does not block: only a definite
answer fails the preflight. docs/cli.md lists the checks and where each rule comes from.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, UnknownServiceError

from cli.aws import AwsTarget, is_client_error
from cli.cdk import ToolCheck
from infra.defaults import base_model_id
from infra.update_policy import batch_instances, update_peak_instances

SAGEMAKER_SERVICE_CODE: Final = "sagemaker"
BIDI_PORT: Final = 8443
"""InvokeEndpointWithBidirectionalStream is served at https://runtime.sagemaker.<region>.<dns suffix>:8443
(the endpoint rules of AWS's sagemaker-runtime-http2 API model). No API says whether a Region
serves it, so the preflight tries a TCP connection to that port."""


def quota_name(instance_type: str) -> str:
    """Service Quotas' name for the per-type limit of real-time endpoint instances."""
    return f"{instance_type} for endpoint usage"


@dataclass(frozen=True, kw_only=True)
class EndpointQuota:
    code: str
    value: int
    source: str = "applied value"
    """Which value this is: the applied one (and from which call) or AWS's default."""


def endpoint_quota(*, target: AwsTarget, instance_type: str) -> EndpointQuota | None:
    """The quota for ``instance_type`` in the target Region; None when Service Quotas knows no
    such quota (SageMaker does not offer that instance type for endpoints there).

    ListServiceQuotas omits a quota whose applied value is unavailable, so a missing entry is
    looked up by name among AWS's defaults (ListAWSDefaultServiceQuotas, for its code), then asked
    for by code: GetServiceQuota (the applied value), else GetAWSDefaultServiceQuota (AWS's default).
    """
    wanted = quota_name(instance_type)
    quotas = target.client("service-quotas")
    for page in quotas.get_paginator("list_service_quotas").paginate(ServiceCode=SAGEMAKER_SERVICE_CODE):
        for quota in page.get("Quotas", []):
            if quota.get("QuotaName") == wanted:
                return EndpointQuota(code=str(quota["QuotaCode"]), value=int(quota.get("Value", 0)))
    code = next((str(quota["QuotaCode"])
                 for page in quotas.get_paginator("list_aws_default_service_quotas").paginate(
                     ServiceCode=SAGEMAKER_SERVICE_CODE)
                 for quota in page.get("Quotas", []) if quota.get("QuotaName") == wanted), None)
    if code is None:
        return None
    try:
        applied = quotas.get_service_quota(ServiceCode=SAGEMAKER_SERVICE_CODE, QuotaCode=code)["Quota"]
        return EndpointQuota(code=code, value=int(applied.get("Value", 0)),
                             source="applied value, from GetServiceQuota (ListServiceQuotas omitted it)")
    except ClientError as exc:
        if not is_client_error(exc, "NoSuchResourceException"):
            raise
    default = quotas.get_aws_default_service_quota(ServiceCode=SAGEMAKER_SERVICE_CODE, QuotaCode=code)["Quota"]
    return EndpointQuota(code=code, value=int(default.get("Value", 0)),
                         source="AWS default value, from GetAWSDefaultServiceQuota: no applied value is available")


def largest_fitting_max(quota: int) -> int:
    """The largest maxInstances whose updates fit in ``quota`` (0 when not even one fits)."""
    best = 0
    while update_peak_instances(best + 1) <= quota:
        best += 1
    return best


def check_endpoint_quota(*, target: AwsTarget, instance_type: str, min_instances: int,
                         max_instances: int) -> ToolCheck:
    """The quota must hold a fleet scaled out to ``max_instances`` plus one rolling batch."""
    name = "instance quota"
    need = update_peak_instances(max_instances)
    try:
        quota = endpoint_quota(target=target, instance_type=instance_type)
    except (ClientError, BotoCoreError) as exc:
        reason = (str(exc.response.get("Error", {}).get("Code") or "error") if isinstance(exc, ClientError)
                  else type(exc).__name__)
        return ToolCheck(name, True, f"not checked (Service Quotas: {reason}); an update needs "
                         f"{need} x {instance_type} ({max_instances} + a rolling batch of "
                         f"{batch_instances(max_instances)})")
    if quota is None:
        return ToolCheck(name, False, f"Service Quotas lists no '{quota_name(instance_type)}' in {target.region}: "
                         f"SageMaker offers no {instance_type} endpoints there",
                         "Pick another --instance-type, or deploy to a Region that offers it (--region).")
    request = (f"aws service-quotas request-service-quota-increase --service-code {SAGEMAKER_SERVICE_CODE} "
               f"--quota-code {quota.code} --desired-value {need} --region {target.region}")
    shown = f"'{quota_name(instance_type)}' is {quota.value} ({quota.source})"
    if quota.value < min_instances:
        return ToolCheck(name, False, f"{shown}: the endpoint's "
                         f"{min_instances} instance(s) cannot start (ResourceLimitExceeded)",
                         f"Request {need} (fleet at --max-instances {max_instances} plus one rolling-update batch): "
                         f"{request}")
    if quota.value < need:
        fits = largest_fitting_max(quota.value)
        lower = f", or deploy with --max-instances {fits}" if fits >= min_instances else ""
        return ToolCheck(name, False, f"{shown}; an update of a fleet at "
                         f"{max_instances} needs {need} (one rolling batch of {batch_instances(max_instances)} "
                         "runs beside it) and would fail and roll back",
                         f"Request the increase: {request}{lower}.")
    return ToolCheck(name, True, f"{shown}; updates need {need} "
                     "(account-wide: other endpoints of this type count against it too)")


def check_agentcore_region(*, target: AwsTarget) -> ToolCheck:
    """AgentCore Runtime must answer in the Region (its control-plane endpoint must exist)."""
    name = "AgentCore in Region"
    hint = ("Deploy to a Region where Amazon Bedrock AgentCore Runtime is offered (--region), see "
            "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/agentcore-regions.html")
    try:
        target.client("bedrock-agentcore-control").list_agent_runtimes(maxResults=1)
    except (EndpointConnectionError, UnknownServiceError) as exc:
        return ToolCheck(name, False, f"no AgentCore Runtime endpoint in {target.region} ({type(exc).__name__})", hint)
    except ClientError as exc:
        if "AccessDenied" in str(exc.response.get("Error", {}).get("Code", "")):
            return ToolCheck(name, True, f"{target.region}: answers (list not permitted to this identity)")
        return ToolCheck(name, True, f"not checked ({exc.response.get('Error', {}).get('Code')})")
    except BotoCoreError as exc:
        return ToolCheck(name, True, f"not checked ({type(exc).__name__})")
    return ToolCheck(name, True, f"{target.region}: AgentCore Runtime answers")


def _connect(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=5):
        pass


PROBE_PROVES: Final = ("a TCP connection only: the Region's runtime host listens on the bidirectional-streaming "
                       "port; not that the API serves this account or that the endpoint streams (first "
                       "`deploy-tts say --mode bidi` shows that)")
"""What the probe proves, said in its result: a listening port, nothing about the API behind it."""


def check_bidi_streaming_region(*, target: AwsTarget,
                                connect: Callable[[str, int], None] = _connect) -> ToolCheck:
    """A TCP connection to the Region's HTTP/2 runtime port. Not blocking when it fails: a proxy
    or firewall may be the reason."""
    host = f"runtime.sagemaker.{target.region}.amazonaws.com"
    try:
        connect(host, BIDI_PORT)
    except OSError as exc:
        return ToolCheck("bidirectional streaming", True,
                         f"not confirmed: {host}:{BIDI_PORT} did not accept a TCP connection ({type(exc).__name__}); "
                         "if the Region lacks InvokeEndpointWithBidirectionalStream, the agent's speech will fail")
    return ToolCheck("bidirectional streaming", True, f"{host}:{BIDI_PORT} accepts connections; proven: {PROBE_PROVES}")


def check_bedrock_model_id(*, target: AwsTarget, model: str) -> ToolCheck:
    """The inference profile (or the base model) must exist in the Region."""
    name = "Bedrock model id"
    bedrock = target.client("bedrock")
    is_profile = base_model_id(model) != model
    hint = (f"Pass --bedrock-model-id with an id listed by `aws bedrock list-inference-profiles --region "
            f"{target.region}` (or `list-foundation-models`), or deploy to a Region that has it.")
    try:
        if is_profile:
            found: dict[str, Any] = bedrock.get_inference_profile(inferenceProfileIdentifier=model)
            status = found.get("status", "ACTIVE")
            if status != "ACTIVE":
                return ToolCheck(name, False, f"inference profile {model} is {status} in {target.region}", hint)
        else:
            bedrock.get_foundation_model(modelIdentifier=model)
    except ClientError as exc:
        if is_client_error(exc, "ResourceNotFoundException", "ValidationException"):
            kind = "inference profile" if is_profile else "foundation model"
            return ToolCheck(name, False, f"no {kind} {model} in {target.region}", hint)
        return ToolCheck(name, True, f"{model}: not checked ({exc.response.get('Error', {}).get('Code')})")
    except BotoCoreError as exc:
        return ToolCheck(name, True, f"{model}: not checked ({type(exc).__name__})")
    return ToolCheck(name, True, f"{model} exists in {target.region}")
