"""Which Bedrock model the agent gets, and whether this account may call it.

One answer for both CLIs: an explicit --bedrock-model-id, else the model the deployed foundation
already grants (its BedrockModelId output), else cdk.json's model as the inference profile of
the target Region. `deploy-tts` passes the same id on, so a TTS redeploy never drops the grant
`deploy-agent --bedrock-model-id X` made (both redeploy the foundation stack).
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from cli.aws import AwsTarget, CliError, get_stack, stack_outputs
from cli.cdk import ToolCheck
from cli.stacks import FOUNDATION_STACK
from infra.defaults import base_model_id, check_profile_region, default_bedrock_model_id, shared_defaults


def deployed_bedrock_model_id(target: AwsTarget) -> str | None:
    """The model the deployed foundation's agent role may invoke (None before the first deploy)."""
    return stack_outputs(get_stack(target.client("cloudformation"), FOUNDATION_STACK)).get("BedrockModelId") or None


def resolve_bedrock_model_id(*, target: AwsTarget, requested: str | None, strict: bool) -> tuple[str, str]:
    """(model id, where it came from). ``strict``: a Region no profile covers is an error."""
    if requested:
        model, source = requested, "--bedrock-model-id"
    elif deployed := deployed_bedrock_model_id(target):
        model, source = deployed, f"kept from the deployed {FOUNDATION_STACK}"
    else:
        try:
            model, source = default_bedrock_model_id(target.region), f"default for {target.region}"
        except ValueError as exc:
            if strict:
                raise CliError(str(exc)) from None
            return shared_defaults()["bedrockModelId"], "cdk.json (no profile covers this Region)"
    if strict:
        try:
            check_profile_region(model, target.region)
        except ValueError as exc:
            raise CliError(f"--bedrock-model-id: {exc}") from None
    return model, source


def console_url(region: str) -> str:
    """The Bedrock console's Model catalog (the "Model access" page is retired: access is automatic
    for callers allowed to subscribe through AWS Marketplace)."""
    return f"https://{region}.console.aws.amazon.com/bedrock/home?region={region}#/model-catalog"


def access_hint(model: str, region: str) -> str:
    return (f"Open {base_model_id(model)} in the Bedrock console's Model catalog ({console_url(region)}) and "
            "try it in the playground once: for an Anthropic model that shows the one-time use-case form "
            "(once per account); your identity needs aws-marketplace:Subscribe and ViewSubscriptions, and "
            "the account a valid payment method. Or pass --bedrock-model-id with a model this account can use.")


def check_first_call(*, target: AwsTarget, model: str) -> ToolCheck:
    """One ConverseStream of one output token with the deployer's credentials, once per deploy.

    The first call to a third-party model subscribes the account (AWS Marketplace), so a deployer
    allowed to subscribe makes the model usable for the agent role too; otherwise the answer says
    what is missing before anything is deployed. The deployed agent then skips its own start-up
    call (BEDROCK_MODEL_CHECKED, agent/voice_agent/model_check.py): one call per deploy, not one
    per session microVM.
    """
    name = "Bedrock first call"
    try:
        response = target.client("bedrock-runtime").converse_stream(
            modelId=model, messages=[{"role": "user", "content": [{"text": "Reply with OK."}]}],
            inferenceConfig={"maxTokens": 1})
        for _event in response.get("stream", ()):
            pass
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        message = str(exc.response.get("Error", {}).get("Message", ""))[:200]
        if code in ("AccessDeniedException", "ResourceNotFoundException", "ValidationException"):
            return ToolCheck(name, False, f"{model}: {code}: {message}", access_hint(model, target.region))
        return ToolCheck(name, True, f"{model}: inconclusive ({code}); deploying anyway")
    except BotoCoreError as exc:
        return ToolCheck(name, True, f"{model}: inconclusive ({type(exc).__name__}); deploying anyway")
    return ToolCheck(name, True, f"{model} answered")


def check_model_access(*, target: AwsTarget, model: str) -> ToolCheck:
    """Bedrock's GetFoundationModelAvailability for the model behind ``model``.

    A definite "not authorized / not available" fails the preflight; when the check itself cannot
    run (no permission for it, an API error) it is reported as not checked rather than blocking.
    """
    name = "Bedrock model access"
    base = base_model_id(model)
    try:
        found = target.client("bedrock").get_foundation_model_availability(modelId=base)
    except (ClientError, BotoCoreError) as exc:
        return ToolCheck(name, True, f"{base}: not checked ({type(exc).__name__}: {str(exc)[:120]})")
    problems = []
    if found.get("authorizationStatus") not in (None, "AUTHORIZED"):
        problems.append(f"authorization {found['authorizationStatus']}")
    if found.get("entitlementAvailability") not in (None, "AVAILABLE"):
        problems.append(f"entitlement {found['entitlementAvailability']}")
    if found.get("regionAvailability") not in (None, "AVAILABLE"):
        problems.append(f"not offered in {target.region}")
    agreement = (found.get("agreementAvailability") or {}).get("status")
    if agreement not in (None, "AVAILABLE", "NOT_AVAILABLE"):
        # NOT_AVAILABLE: the model has no agreement to accept; PENDING/ERROR: one is not in force.
        problems.append(f"agreement {agreement}")
    if problems:
        return ToolCheck(name, False, f"{base}: " + ", ".join(problems), access_hint(model, target.region))
    return ToolCheck(name, True, f"{base}: available")
