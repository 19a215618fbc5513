"""The stand-in's settings, validated once: a bad value names its field."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")  # SageMaker's EndpointName pattern


class SettingsError(ValueError):
    """A setting is missing or malformed."""


@dataclass(frozen=True, kw_only=True)
class StandInSettings:
    """What one stand-in serves: an endpoint name, a region, the credentials it accepts, a container."""

    endpoint_name: str
    region: str
    access_key_id: str
    secret_access_key: str
    container_url: str
    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        if not _ENDPOINT_NAME.match(self.endpoint_name) or len(self.endpoint_name) > 63:
            raise SettingsError(f"endpoint_name: {self.endpoint_name!r} is not a valid SageMaker endpoint name")
        if not re.match(r"^[a-z]{2}(-[a-z]+)+-\d$", self.region):
            raise SettingsError(f"region: {self.region!r} is not an AWS region name")
        if not self.access_key_id or not self.secret_access_key:
            raise SettingsError("AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: the stand-in needs the credentials "
                                "it accepts in its environment")
        parts = urlsplit(self.container_url)
        if parts.scheme != "http" or not parts.hostname:
            raise SettingsError(f"container_url: {self.container_url!r} must be http://HOST:PORT")
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"port (SM_PORT): {self.port} is out of range")

    @property
    def container_ws_url(self) -> str:
        """Where SageMaker opens the container's WebSocket (its documented path)."""
        return "ws" + self.container_url.rstrip("/")[4:] + "/invocations-bidirectional-stream"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> StandInSettings:
        """Credentials and port from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, SM_PORT)."""
        env = os.environ if env is None else env
        port_text = env.get("SM_PORT", "0") or "0"
        try:
            port = int(port_text)
        except ValueError:
            raise SettingsError(f"SM_PORT: {port_text!r} is not a port number") from None
        values: dict[str, object] = {
            "access_key_id": env.get("AWS_ACCESS_KEY_ID", ""),
            "secret_access_key": env.get("AWS_SECRET_ACCESS_KEY", ""),
            "region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            "port": port,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
