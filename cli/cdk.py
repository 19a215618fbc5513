"""Running the CDK CLI (`cdk deploy` / `cdk diff`) and checking the local tools it needs.

Tool lookups go through PATH on every call, so a test (or a user) controls which `node`,
`npx`, `cdk` and `docker` are used just by setting PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cli.aws import AwsTarget, CliError
from infra.defaults import DEFAULT_QUALIFIER, bootstrap_qualifier

CDK_CLI_VERSION = "2.1148.0"
BOOTSTRAP_QUALIFIER = bootstrap_qualifier()
"""cdk.json's @aws-cdk/core:bootstrapQualifier (or CDK's default): the one infra synthesizes with."""
MIN_NODE_MAJOR = 18
SUPPORTED_NODE_MAJOR = 22
"""jsii (aws-cdk-lib for Python) supports Node 22 and 24; older runs, with an end-of-life banner."""
REPO_ROOT = Path(__file__).resolve().parent.parent
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class ToolCheck:
    """One local prerequisite: whether it is usable, what was found, and how to fix it."""

    name: str
    ok: bool
    detail: str
    hint: str = ""


def _version(text: str) -> tuple[int, int, int] | None:
    match = _VERSION_RE.search(text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _run_quiet(argv: list[str], *, timeout_s: float) -> subprocess.CompletedProcess[str] | None:
    """Run a probe command; None when it cannot be started or hangs."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def check_node() -> ToolCheck:
    """The CDK CLI and jsii run on Node.js: require node >= 18, and say so below 22 (jsii no longer
    supports 20 since 2026-10-30)."""
    hint = "Install Node.js 22 LTS or newer (https://nodejs.org; jsii no longer supports 20) and put `node` on PATH."
    node = shutil.which("node")
    if not node:
        return ToolCheck("node", False, "node not found on PATH", hint)
    proc = _run_quiet([node, "--version"], timeout_s=20)
    found = _version(proc.stdout) if proc and proc.returncode == 0 else None
    if not found:
        return ToolCheck("node", False, f"{node} --version failed", hint)
    if found[0] < MIN_NODE_MAJOR:
        return ToolCheck("node", False, f"node {'.'.join(map(str, found))} is too old", hint)
    shown = ".".join(map(str, found))
    if found[0] < SUPPORTED_NODE_MAJOR:
        return ToolCheck("node", True, f"node {shown} (works, but jsii supports only {SUPPORTED_NODE_MAJOR}+: upgrade)")
    return ToolCheck("node", True, f"node {shown}")


def cdk_command() -> list[str]:
    """Pick the CDK CLI: a `cdk` on PATH if it is at least the pinned version, else the pinned one via npx."""
    cdk = shutil.which("cdk")
    if cdk:
        proc = _run_quiet([cdk, "--version"], timeout_s=60)
        found = _version(proc.stdout) if proc and proc.returncode == 0 else None
        if found and found >= _version(CDK_CLI_VERSION):  # type: ignore[operator]
            return [cdk]
    npx = shutil.which("npx")
    if npx:
        return [npx, "--yes", f"aws-cdk@{CDK_CLI_VERSION}"]
    raise CliError(
        "Neither npx nor a recent `cdk` was found on PATH.",
        hint=f"Install Node.js (it ships npx), or `npm install -g aws-cdk@{CDK_CLI_VERSION}`.",
    )


def check_cdk_cli() -> ToolCheck:
    """Report which CDK CLI will run, without running npx (that may download the package)."""
    try:
        argv = cdk_command()
    except CliError as exc:
        return ToolCheck("cdk", False, exc.message, exc.hint or "")
    return ToolCheck("cdk", True, " ".join(Path(argv[0]).name if i == 0 else a for i, a in enumerate(argv)))


def docker_binary() -> str:
    """CDK builds image assets with `docker`, or whatever CDK_DOCKER names (finch, podman)."""
    return os.environ.get("CDK_DOCKER") or "docker"


def check_docker() -> ToolCheck:
    """Image assets are built locally: the Docker engine must answer `docker info`."""
    name = docker_binary()
    path = shutil.which(name)
    if not path:
        return ToolCheck(
            "docker",
            False,
            f"{name} not found on PATH",
            "Install Docker (Docker Desktop / Docker Engine), or set CDK_DOCKER=finch|podman; "
            "CDK builds the container images locally before deploying.",
        )
    proc = _run_quiet([path, "info", "--format", "{{.ServerVersion}}"], timeout_s=30)
    if proc is None or proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no answer"])[-1] if proc else "timed out"
        return ToolCheck(
            "docker",
            False,
            f"Docker engine not reachable: {reason}",
            "Start the Docker engine (e.g. open Docker Desktop, or `sudo systemctl start docker`), "
            "then check with `docker info`.",
        )
    return ToolCheck("docker", True, f"engine {proc.stdout.strip() or 'running'}")


BINFMT_FIX = "docker run --privileged --rm tonistiigi/binfmt --install {arch}"
"""Docker's documented QEMU set-up for building foreign-architecture images (multi-platform builds)."""


def check_build_platforms(platforms: tuple[str, ...]) -> ToolCheck:
    """The builder must build every image platform (the agent is linux/arm64, the TTS image
    linux/amd64): without QEMU/binfmt an x86 machine fails the arm64 build minutes into a deploy."""
    name = docker_binary()
    wanted = ", ".join(platforms)
    path = shutil.which(name)
    if Path(name).name != "docker" or not path:
        return ToolCheck("image platforms", True, f"{wanted}: not checked ({name} has no buildx)")
    proc = _run_quiet([path, "buildx", "inspect"], timeout_s=60)
    if proc is None or proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no answer"])[-1] if proc else "timed out"
        return ToolCheck("image platforms", False, f"`docker buildx inspect` failed: {reason}",
                         "Install Docker's buildx plugin (it ships with Docker Desktop and docker-ce).")
    listed = {p.strip().rstrip("*") for line in proc.stdout.splitlines()
              if line.strip().startswith("Platforms:") for p in line.split(":", 1)[1].split(",")}
    missing = [p for p in platforms if not any(have == p or have.startswith(p + "/") for have in listed)]
    if missing:
        arches = ",".join(p.split("/")[1] for p in missing)
        return ToolCheck(
            "image platforms", False,
            f"the Docker builder cannot build {', '.join(missing)} (it lists {', '.join(sorted(listed)) or 'none'})",
            f"Register QEMU emulators once: {BINFMT_FIX.format(arch=arches)} , "
            "then check `docker buildx inspect --bootstrap` lists them.",
        )
    return ToolCheck("image platforms", True, f"builder lists {wanted}")


def context_args(context: dict[str, str | int | None]) -> list[str]:
    """Turn CDK context into `-c key=value` pairs, skipping unset values."""
    args: list[str] = []
    for key, value in context.items():
        if value is not None and value != "":
            args += ["-c", f"{key}={value}"]
    return args


def cdk_env(target: AwsTarget) -> dict[str, str]:
    """Environment for the CDK CLI: same region/profile as the boto3 calls of this CLI."""
    env = dict(os.environ)
    env["AWS_REGION"] = target.region
    env["AWS_DEFAULT_REGION"] = target.region
    env["CDK_DEFAULT_REGION"] = target.region
    if target.profile:
        env["AWS_PROFILE"] = target.profile
    return env


def cdk_app_dir() -> Path:
    """Where cdk.json lives: the repo root, unless KOKORO_CDK_APP_DIR points elsewhere."""
    return Path(os.environ.get("KOKORO_CDK_APP_DIR") or REPO_ROOT)


def run_cdk(*, target: AwsTarget, args: list[str], cwd: Path | None = None) -> int:
    """Run the CDK CLI in the repo root with output streaming to the terminal; return its exit code."""
    cwd = cwd or cdk_app_dir()
    if not (cwd / "cdk.json").is_file():
        raise CliError(
            f"No cdk.json in {cwd}.",
            hint="Run the CLI from a source checkout of this repository (pip install -e .).",
        )
    argv = [*cdk_command(), *args]
    if target.profile:
        argv += ["--profile", target.profile]
    try:
        return subprocess.run(argv, cwd=cwd, env=cdk_env(target), check=False).returncode
    except OSError as exc:
        raise CliError(f"Could not start the CDK CLI ({argv[0]}): {exc}") from exc


def bootstrap_command(*, account: str, region: str, profile: str | None) -> str:
    """The `cdk bootstrap` that creates what the deploys look for, with the qualifier they use."""
    qualifier = "" if BOOTSTRAP_QUALIFIER == DEFAULT_QUALIFIER else f" --qualifier {BOOTSTRAP_QUALIFIER}"
    return (f"npx --yes aws-cdk@{CDK_CLI_VERSION} bootstrap aws://{account}/{region}{qualifier}"
            + (f" --profile {profile}" if profile else ""))


def gc_command(*, account: str, region: str, profile: str | None) -> str:
    """CDK's garbage collector for the bootstrap's asset repository and bucket, listing only:
    ``--action=print`` names what no deployed stack of the environment (any CDK app) uses."""
    return (f"npx --yes aws-cdk@{CDK_CLI_VERSION} gc aws://{account}/{region} --unstable=gc --type=all "
            "--action=print" + (f" --profile {profile}" if profile else ""))


def cdk_deploy(*, target: AwsTarget, stack: str, context: dict[str, str | int | None],
               import_existing: bool = False) -> None:
    """`cdk deploy STACK --require-approval never -c ...`; a failure stops the whole deploy.

    ``import_existing``: CloudFormation adopts named resources that already exist (the endpoint's
    log group, which SageMaker created before the stack owned it) instead of failing on them.
    """
    code = run_cdk(
        target=target,
        args=["deploy", stack, "--require-approval", "never", *context_args(context),
              *(["--import-existing-resources"] if import_existing else [])],
    )
    if code != 0:
        raise CliError(
            f"cdk deploy {stack} failed (exit code {code}); see the CDK output above.",
            hint="Fix the cause and rerun the same command: finished stacks are left as they are.",
        )


def cdk_diff(*, target: AwsTarget, stacks: list[str], context: dict[str, str | int | None], fail: bool) -> int:
    """`cdk diff STACKS --no-change-set -c ...` (with `--fail`: non-zero on differences); cdk's exit code.

    Read-only on purpose: with a change set (CDK's default) the diff assumes the bootstrap's deploy
    role and creates a change set; without one it reads the deployed templates through the lookup
    role, which CI's CdkDiffPolicy allows (docs/infrastructure.md#cross-service-calls)."""
    node = check_node()
    if not node.ok:
        raise CliError(node.detail, hint=node.hint)
    return run_cdk(target=target, args=["diff", *stacks, "--no-change-set", *context_args(context),
                                        *(["--fail"] if fail else [])])
