"""``serve``: validate and load the model, warm it up, then serve on PORT (SageMaker: 8080).

Loading happens before the socket opens, so a missing or wrong file stops the container with a
message naming the file and a non-zero exit, instead of a server that answers /ping and then
fails every request.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from .config import ConfigError, Settings
from .model_dir import ModelDirError
from .supervisor import EXIT_BAD_MODEL  # exit 2: a refusal to start, never retried

if TYPE_CHECKING:
    from .scheduler import Scheduler
    from .sizing import JobSizer
    from .synth import Synthesizer

SIGKILL_AFTER_S = 30  # SageMaker's SIGKILL after SIGTERM (its inference container guide)

log = logging.getLogger("kokoro_server")


def onnx_over_torch_dir(settings: Settings) -> Path:
    """Where to serve the onnx engine from when the model directory holds only torch weights.

    On SageMaker the model cache is Hugging Face's torch snapshot. With KOKORO_ENGINE=onnx (a CPU
    instance), the container builds the int8 ONNX export it carries (see packaged_weights.py) into
    KOKORO_ONNX_DIR and adds the cache's voice packs, so the English voices come along. The
    builder lives in the build-time package kokoro_tools (packaged_weights.py), imported only here,
    when it is needed; its failure stops the start like a bad model directory.
    """
    root = settings.model_dir
    if settings.engine != "onnx" or not root.is_dir() or any(root.glob("*.onnx")):
        return root
    from kokoro_tools.packaged_weights import build_model_dir
    from kokoro_tools.weight_parts import PackagedWeightsError

    target = Path(os.environ.get("KOKORO_ONNX_DIR", "/tmp/kokoro-82m-onnx"))
    try:
        build_model_dir(target)
    except PackagedWeightsError as exc:
        raise ModelDirError(str(exc)) from exc
    for pack in sorted((root / "voices").glob("*.pt")):
        if not (target / "voices" / pack.name).exists():
            shutil.copyfile(pack, target / "voices" / pack.name)
    log.info("onnx engine over the torch directory %s: serving %s", root, target)
    return target


@dataclass(frozen=True, kw_only=True)
class Strategies:
    """What a benchmark may pass in to compare against (bench/variants.py builds them; never
    settings): the scheduler's class, the synthesizer's class, the job sizer. The defaults are
    what the server serves with."""

    scheduler: type[Scheduler] | None = None
    synthesizer: type[Synthesizer] | None = None
    sizer: JobSizer | None = None  # None: the engine's device's profile (sizing.py)


def load(settings: Settings, strategies: Strategies = Strategies()) -> Callable[[Scheduler], Synthesizer]:
    """Return ``synth_factory`` for the app, with the engine loaded and warmed up now."""
    from .engines import load_engine
    from .model_dir import open_model_dir

    started = time.perf_counter()
    model = open_model_dir(onnx_over_torch_dir(settings), engine=settings.engine)
    engine = load_engine(model, device=settings.device)
    from .pace import pace_of
    from .sizing import Cost
    from .synth import Synthesizer  # imports kokoro (and torch): after the cheap checks
    log.info("loaded %s engine on %s from %s with %d voices in %.1fs", engine.name, engine.device,
             model.root, len(model.voices), time.perf_counter() - started)
    synthesizer = strategies.synthesizer or Synthesizer

    def factory(scheduler: Scheduler) -> Synthesizer:
        synth = synthesizer(engine=engine, voices=model.voices, scheduler=scheduler,
                            default_voice=settings.default_voice, vocab=model.vocab, sizer=strategies.sizer,
                            languages=settings.languages)
        if settings.warmup:
            began = time.perf_counter()
            synth.warm_up()
            log.info("warmed up in %.1fs", time.perf_counter() - began)
        pace = settings.decoder_pace
        decoded: list[tuple[int, float]] = []
        if pace is None and settings.warmup:
            decoded = synth.measure_windows()
            pace = pace_of(decoded)
        synth.keep_up(Cost(pace=pace or 0.0), remeasure=settings.decoder_pace is None, decoded=decoded)
        cost = synth.cost
        log.info("windows are sized by a decoder cost of %.0f ms a call and %.3f s per audio second%s",
                 1000 * cost.overhead, cost.pace,
                 " (fitted at warm-up)" if synth.pace.fitted else " (measured)" if decoded else "")
        return synth

    return factory


def main(argv: list[str] | None = None, strategies: Strategies = Strategies()) -> int:
    parser = argparse.ArgumentParser(prog="serve", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="serve", choices=["serve"],
                        help="SageMaker runs the image as `docker run IMAGE serve`")
    parser.add_argument("--host", default=None, help="bind address (KOKORO_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (PORT, default 8080)")
    parser.add_argument("--model-dir", default=None, help="model directory (KOKORO_MODEL_DIR)")
    args = parser.parse_args(argv)
    if os.environ.get("KOKORO_SUPERVISE") == "1":  # the image sets it: see supervisor.py
        from .supervisor import supervise

        return supervise(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    env = None
    if args.model_dir:
        env = dict(os.environ, KOKORO_MODEL_DIR=args.model_dir)
    try:
        settings = Settings.from_env(env)
        factory = load(settings, strategies)
    except (ConfigError, ModelDirError) as exc:
        print(f"kokoro-server: cannot start: {exc}", file=sys.stderr)
        return EXIT_BAD_MODEL
    from .app import create_app, drain, websocket_protocol
    from .shutdown import DrainingServer

    app = create_app(settings=settings, synth_factory=factory, scheduler_class=strategies.scheduler)
    config = uvicorn.Config(
        app,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level="info",
        ws=websocket_protocol(),  # uvicorn's sans-I/O protocol, able to drop a client that stopped reading
        ws_max_size=1024 * 1024,  # frames over our 64 KiB limit get an error frame, not a dropped socket
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_keep_alive=75,
        # after the drain, requests in flight finish within what is left of SageMaker's 30 s
        timeout_graceful_shutdown=max(1, int(SIGKILL_AFTER_S - 2 - settings.drain_s)),
    )
    try:
        DrainingServer(config, drain=lambda: drain(app)).run()
    except KeyboardInterrupt:  # uvicorn shut down cleanly on SIGINT (Ctrl-C), then raised it again for us
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
