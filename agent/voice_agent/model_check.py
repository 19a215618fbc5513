"""Start-up check of the Bedrock model: fail before serving when it can never answer.

Deployed, the runtime sets AGENT_MODEL=bedrock, so a missing credential or a model this account
may not call must stop the process with a message naming what is missing, never fall back to the
offline scripted model. The check is one ConverseStream of one output token (the permission the
agent role already has, bedrock:InvokeModelWithResponseStream); errors that say nothing about
access (throttling, a 5xx, no network) are logged and serving goes on.
"""

from __future__ import annotations

import logging
from typing import Any

from .config import AgentConfig, ConfigError

log = logging.getLogger("voice_agent")

# Bedrock's answers that mean "this model will never answer this caller" (not transient).
_FATAL = {
    "AccessDeniedException": "no access to the model: enable it on the Bedrock console's Model access page "
                             "and allow bedrock:InvokeModelWithResponseStream on it for this role",
    "ResourceNotFoundException": "the model id does not exist in this Region",
    "ValidationException": "Bedrock refused the model id",
    "UnrecognizedClientException": "the AWS credentials were rejected",
    "ExpiredTokenException": "the AWS credentials have expired",
}


def check_bedrock_model(config: AgentConfig, *, client: Any = None) -> None:
    """Raise :class:`ConfigError` when ``config``'s Bedrock model cannot answer this caller."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

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
