"""Start-up check of the Bedrock model: fail before serving when it can never answer.

Deployed, the runtime sets AGENT_MODEL=bedrock, so a missing credential or a model this account
may not call must stop the process with a message naming what is missing, never fall back to the
offline scripted model. The check is one ConverseStream of one output token (the permission the
agent role already has, bedrock:InvokeModelWithResponseStream); errors that say nothing about
access (throttling, a 5xx, no network) are logged and serving goes on.

Deployed, `deploy-agent` makes that call once per deploy (cli/bedrock.py, check_first_call) and the
stack sets BEDROCK_MODEL_CHECKED: AgentCore starts one microVM per session, and a billed call plus
its latency in every session's start would buy nothing the deploy did not already learn.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

from .config import AgentConfig, ConfigError

log = logging.getLogger("voice_agent")

SUBSCRIPTION: Final = (
    "the account's AWS Marketplace subscription to this model is missing or failed (Bedrock subscribes on a "
    "first call and that subscription can still fail up to 15 minutes after calls succeeded: payment method, "
    "Anthropic use-case form); open the model in the Bedrock console's Model catalog, then run "
    "`deploy-agent deploy` again")
"""What an access refusal means for this runtime: its role may invoke the model (the stack grants it)
and holds no Marketplace action, so the subscription the deployer's first call made is the cause."""
_SUBSCRIPTION_WORDS: Final = ("marketplace", "subscription", "subscribe", "use case", "agreement")

# Bedrock's answers that mean "this model will never answer this caller" (not transient).
_FATAL = {
    "AccessDeniedException": SUBSCRIPTION,
    "ResourceNotFoundException": "the model id does not exist in this Region",
    "ValidationException": "Bedrock refused the model id",
    "UnrecognizedClientException": "the AWS credentials were rejected",
    "ExpiredTokenException": "the AWS credentials have expired",
}


CHECKED_ENV: Final = "BEDROCK_MODEL_CHECKED"
"""Set by the runtime stack (value: who checked, "deploy-agent"): skip the start-up call."""


def check_bedrock_model(config: AgentConfig, *, client: Any = None) -> None:
    """Raise :class:`ConfigError` when ``config``'s Bedrock model cannot answer this caller."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    if os.environ.get(CHECKED_ENV):
        log.info("Bedrock model %s checked by %s at deploy time; no start-up call", config.model_id,
                 os.environ[CHECKED_ENV])
        return
    if client is None:
        import boto3

        client = boto3.client("bedrock-runtime", region_name=config.region)
    try:
        response = client.converse_stream(
            modelId=config.model_id,
            messages=[{"role": "user", "content": [{"text": "Reply with OK."}]}],
            inferenceConfig={"maxTokens": 1},
        )
        for _event in response.get("stream", ()):
            pass
    except NoCredentialsError:
        raise ConfigError("AGENT_MODEL=bedrock: no AWS credentials were found") from None
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in _FATAL:
            message = exc.response.get("Error", {}).get("Message", "")
            raise ConfigError(f"AGENT_MODEL=bedrock, BEDROCK_MODEL_ID={config.model_id} in {config.region}: "
                              f"{_FATAL[code]} ({code}: {message})") from None
        log.warning("Bedrock model check inconclusive (%s); serving anyway", code or exc)
    except BotoCoreError as exc:
        log.warning("Bedrock model check inconclusive (%s); serving anyway", exc)


def describe_model_failure(exc: BaseException, *, model_id: str) -> str:
    """One line for a failed model call; an access refusal names the subscription first.

    Bedrock's first call to a third-party model starts the account's Marketplace subscription, and
    "your API calls may succeed temporarily while the subscription is being finalized" (Bedrock
    user guide, "Request access to models"): a runtime that answered at first can be refused
    minutes later, and its error must say why.
    """
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        message = " ".join(str(exc.response.get("Error", {}).get("Message", "")).split())
        if code == "AccessDeniedException" or any(word in message.lower() for word in _SUBSCRIPTION_WORDS):
            return f"Bedrock refused {model_id} ({code}): {SUBSCRIPTION}. AWS said: {message}"
    return " ".join(f"{type(exc).__name__}: {exc}".split())
