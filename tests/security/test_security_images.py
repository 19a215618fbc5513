"""No secrets in images or templates, and the containers run as non-root.

Scanned: both Dockerfiles, the synthesized CloudFormation templates as committed
(infra/baselines, which `make snapshot-check` keeps equal to what `make synth` writes) and
cdk.out when a synth left one. The bucket-TLS and endpoint-scoped invoke policy checks live in
tests/infra (test_every_bucket_denies_non_tls_requests,
test_invoke_managed_policy_is_the_three_actions_on_the_endpoint); they are not repeated here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = [REPO / "containers/kokoro/Dockerfile", REPO / "agent/Dockerfile"]
TEMPLATES = sorted((REPO / "infra/baselines").glob("*.json")) + sorted((REPO / "cdk.out").glob("*.template.json"))

SECRET_PATTERNS = {
    "AWS access key id": re.compile(r"\b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    "AWS secret access key": re.compile(r"(?i)aws.{0,20}secret.{0,20}['\"=: ]+[A-Za-z0-9/+]{40}\b"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "Hugging Face token": re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    "Slack token": re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}\b"),
}
CREDENTIAL_NAMES = re.compile(r"(?i)(SECRET|PASSWORD|PASSWD|TOKEN|ACCESS_KEY|API_KEY|CREDENTIAL|PRIVATE_KEY)")


def secrets_in(text: str) -> list[str]:
    return [f"{kind}: {match.group(0)[:12]}..." for kind, pattern in SECRET_PATTERNS.items()
            for match in pattern.finditer(text)]


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    text = path.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def env_names(rest: str) -> list[str]:
    return re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", rest) or rest.split()[:1]


KOKORO_DOCKERFILE = REPO / "containers" / "kokoro" / "Dockerfile"


def test_kokoro_starts_as_root_and_serves_as_its_unprivileged_user() -> None:
    """SageMaker expects containers to run as root; the supervisor drops to KOKORO_RUN_AS
    (tests/kokoro/test_supervisor.py proves the drop on a real process)."""
    instructions = dockerfile_instructions(KOKORO_DOCKERFILE)
    assert [rest for keyword, rest in instructions if keyword == "USER"] == []
    env = " ".join(rest for keyword, rest in instructions if keyword == "ENV")
    assert re.search(r"\bKOKORO_SUPERVISE=1\b", env)
    run_as = re.search(r"\bKOKORO_RUN_AS=(\S+)", env)
    assert run_as and run_as.group(1) not in ("root", "0")
    created = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    uid = re.search(rf"useradd --uid (\d+) .*\b{re.escape(run_as.group(1))}\b", created)
    assert uid and int(uid.group(1)) >= 1000


@pytest.mark.parametrize("path", [p for p in DOCKERFILES if p != KOKORO_DOCKERFILE],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_containers_run_as_a_non_root_user(path: Path) -> None:
    instructions = dockerfile_instructions(path)
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users, f"{path}: no USER: the container would run as root"
    final = users[-1].split(":")[0]
    assert final not in ("root", "0"), final
    created = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert re.search(rf"useradd --uid (\d+) .*{re.escape(final)}\b", created), "the USER is created with a uid"
    match = re.search(r"useradd --uid (\d+)", created)
    assert match is not None
    uid = int(match.group(1))
    assert uid >= 1000
    # nothing after the USER switches back to root
    last_user = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "USER")
    assert all(keyword != "USER" for keyword, _ in instructions[last_user + 1:])


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_dockerfiles_set_no_credentials(path: Path) -> None:
    text = path.read_text()
    assert secrets_in(text) == []
    for keyword, rest in dockerfile_instructions(path):
        if keyword in ("ENV", "ARG"):
            assert not [n for n in env_names(rest) if CREDENTIAL_NAMES.search(n) or n.startswith("AWS_")], rest
        if keyword in ("COPY", "ADD"):
            assert not re.search(r"\.aws|\.ssh|\.env\b|credentials|\.netrc", rest), rest


def test_the_docker_build_context_leaves_out_local_secrets_and_environments() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for needed in (".venv", ".venv-kokoro", "models", "cdk.out", ".git"):
        assert any(line.strip("/").rstrip("/") in (needed, f"{needed}*") for line in ignored), needed


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}/{index}")


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(REPO)))
def test_templates_carry_no_secrets_and_no_literal_credentials_in_environment(path: Path) -> None:
    text = path.read_text()
    assert secrets_in(text) == []
    template = json.loads(text)
    for where, node in walk(template):
        if not isinstance(node, dict):
            continue
        # Environment maps of containers, runtimes and functions: a credential-like name must not
        # carry a literal value (a Ref/secret lookup would be a dict)
        for key in ("Environment", "EnvironmentVariables", "Variables"):
            env = node.get(key)
            if isinstance(env, dict):
                for name, value in env.items():
                    if CREDENTIAL_NAMES.search(name) or name.startswith("AWS_SECRET") or name == "AWS_ACCESS_KEY_ID":
                        assert not isinstance(value, str), f"{where}/{key}/{name} is a literal"


def test_the_scanner_finds_planted_secrets() -> None:
    planted = ('ENV AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP\n'
               'aws_secret_access_key = "abcdEFGHijklMNOPqrstUVWXyz0123456789ABCD"\n'
               '-----BEGIN RSA PRIVATE KEY-----\nhf_abcdefghijklmnopqrstuvwxyzABCDEF\n')
    kinds = {found.split(":")[0] for found in secrets_in(planted)}
    assert kinds == {"AWS access key id", "AWS secret access key", "private key", "Hugging Face token"}
    assert secrets_in("arn:aws:iam::123456789012:role/kokoro AKIA-not-a-key sha256:" + "a" * 64) == []
