"""``make demo SAGEMAKER=1``: the demo with the agent speaking through the SageMaker stand-in.

The production path on this machine: page -> agent -> HTTP/2 SDK (SigV4, event stream, TLS) ->
the stand-in -> the Kokoro container's WebSocket. Three processes: the stand-in (which starts the
Kokoro server), then the agent, told only the endpoint name and, through the environment, the
stand-in's URL, CA and credentials. The agent answers with its offline model: the credentials it
holds are the stand-in's, which Bedrock would refuse.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from voice_agent.demo import stop, wait_ready

READY_TIMEOUT_S = 240.0
ACCESS_KEY_ID = "SAGEMAKERLOCALKEYID"
SECRET_ACCESS_KEY = "sagemaker-local-secret"


def _start_standin(args: argparse.Namespace, env: dict[str, str]) -> tuple[subprocess.Popen[str], dict[str, str]]:
    standin = subprocess.Popen(
        [sys.executable, "-m", "standins.sagemaker_runtime", "--model-dir", args.model_dir,
         "--kokoro-python", args.kokoro_python, "--container-port", str(args.tts_port)],
        env={**env, "SM_PORT": str(args.sm_port)}, stdout=subprocess.PIPE, text=True,
        start_new_session=True)  # a terminal's Ctrl-C reaches the demo only; stop() passes it on once
    values: dict[str, str] = {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    assert standin.stdout is not None
    while "ca_bundle" not in values and time.monotonic() < deadline:
        line = standin.stdout.readline()
        if not line:
            raise RuntimeError(f"the stand-in exited with {standin.wait()} before it was ready")
        key, _, value = line.strip().partition("=")
        values[key] = value
    if "ca_bundle" not in values:
        raise RuntimeError("the stand-in was not ready in time")
    return standin, values


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="standins.sagemaker_runtime.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--tts-port", type=int, default=int(os.environ.get("TTS_PORT", "8080")))
    parser.add_argument("--agent-port", type=int, default=int(os.environ.get("AGENT_PORT", "8090")))
    parser.add_argument("--sm-port", type=int, default=int(os.environ.get("SM_PORT", "8443")))
    parser.add_argument("--model-dir", default=os.environ.get("KOKORO_MODEL_DIR", "models/kokoro-82m-onnx"))
    parser.add_argument("--kokoro-python", default=os.environ.get("KOKORO_PYTHON", ".venv-kokoro/bin/python"))
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # stop the children on TERM too, not only on Ctrl-C
    if not Path(args.model_dir).is_dir() or not Path(args.kokoro_python).exists():
        print(f"demo: need {args.model_dir} and {args.kokoro_python}; run `make install local-model`", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
                "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"})
    standin: subprocess.Popen[str] | None = None
    agent: subprocess.Popen[bytes] | None = None
    try:
        standin, ready = _start_standin(args, env)
        agent_env = {**env, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": ready["endpoint_url"],
                     "AWS_CA_BUNDLE": ready["ca_bundle"], "AWS_CONFIG_FILE": os.devnull,
                     "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
        agent_url = f"http://127.0.0.1:{args.agent_port}"
        agent = subprocess.Popen([sys.executable, "-m", "voice_agent", "--port", str(args.agent_port),
                                  "--tts-endpoint", ready["endpoint_name"], "--offline", "--page"], env=agent_env,
                                 start_new_session=True)
        wait_ready(f"{agent_url}/ping", process=agent, timeout=60)
        print(f"\n  Voice agent ready: open {agent_url}/  (TTS: SageMaker endpoint {ready['endpoint_name']} at "
              f"{ready['endpoint_url']}, the local stand-in; Ctrl-C stops everything)\n", flush=True)
        while standin.poll() is None and agent.poll() is None:
            time.sleep(0.5)
        print("demo: a process exited; stopping the others", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ndemo: stopping", file=sys.stderr)
        return 0
    except RuntimeError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    finally:
        if agent is not None:
            stop(agent, "the agent")
        if standin is not None:
            stop(standin, "the SageMaker stand-in")


if __name__ == "__main__":
    sys.exit(main())
