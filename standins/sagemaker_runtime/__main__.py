"""``python -m standins.sagemaker_runtime``: the SageMaker runtime stand-in, in front of a container.

Either point it at a running container (``--container-url``) or let it start the Kokoro server from
the Kokoro environment (``--model-dir``, ``--kokoro-python``). It accepts only the credentials in
its environment and prints ``endpoint_url=``, ``endpoint_name=``, ``region=`` and ``ca_bundle=``
lines once it listens, then (on stderr) an ``export ...`` line with everything a client needs,
the key pair it accepts included.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import signal
import sys
import tempfile
from pathlib import Path

from .container import ContainerProcess
from .server import Listening, run
from .settings import SettingsError, StandInSettings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m standins.sagemaker_runtime", description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint-name", default=os.environ.get("SM_ENDPOINT_NAME", "kokoro-tts"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--container-url", help="a running container, http://HOST:PORT (else one is started)")
    parser.add_argument("--model-dir", default=os.environ.get("KOKORO_MODEL_DIR"),
                        help="the model directory of the Kokoro server to start")
    parser.add_argument("--kokoro-python", default=os.environ.get("KOKORO_PYTHON", ".venv-kokoro/bin/python"))
    parser.add_argument("--container-port", type=int, default=int(os.environ.get("SM_CONTAINER_PORT", "0")),
                        help="port of the started container (0: a free one)")
    parser.add_argument("--state-dir", type=Path, help="where the test CA is written (default: a temporary dir)")
    return parser


async def _main(args: argparse.Namespace) -> int:
    container: ContainerProcess | None = None
    container_url = args.container_url
    if not container_url:
        if not args.model_dir:
            print("sagemaker-local: pass --container-url or --model-dir (KOKORO_MODEL_DIR)", file=sys.stderr)
            return 2
        container = ContainerProcess(python=Path(args.kokoro_python), model_dir=Path(args.model_dir),
                                     host=args.host, port=args.container_port)
        container_url = await asyncio.to_thread(container.start)
    try:
        settings = StandInSettings.from_env(endpoint_name=args.endpoint_name, container_url=container_url,
                                            host=args.host)
    except SettingsError as exc:
        print(f"sagemaker-local: {exc}", file=sys.stderr)
        if container is not None:
            container.stop()
        return 2
    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, shutdown.set)

    def ready(listening: Listening) -> None:
        print(f"container_url={container_url}", flush=True)
        for line in listening.lines():
            print(line, flush=True)
        client_env = {
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": listening.endpoint_url, "AWS_CA_BUNDLE": str(listening.ca_bundle),
            "AWS_REGION": listening.region, "AWS_DEFAULT_REGION": listening.region,
            "AWS_ACCESS_KEY_ID": settings.access_key_id, "AWS_SECRET_ACCESS_KEY": settings.secret_access_key,
        }
        exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in client_env.items())
        print(f"sagemaker-local: ready; it accepts only the access key id {settings.access_key_id!r} and its "
              "made-up local secret. A client reaches it from a shell with (Ctrl-C stops it):\n"
              f"export {exports}", file=sys.stderr, flush=True)

    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="sagemaker-local-"))
    try:
        await run(settings=settings, state_dir=state_dir, shutdown=shutdown, on_ready=ready)
    finally:
        if container is not None:
            await asyncio.to_thread(container.stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("SM_LOG_LEVEL", "WARNING"), format="sagemaker-local: %(message)s")
    try:
        return asyncio.run(_main(_parser().parse_args(argv)))
    except RuntimeError as exc:
        print(f"sagemaker-local: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
