"""``serve``: validate and load the model, warm it up, then serve on PORT (SageMaker: 8080).

Loading happens before the socket opens, so a missing or wrong file stops the container with a
message naming the file and a non-zero exit, instead of a server that answers /ping and then
fails every request.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import uvicorn

from .config import ConfigError, Settings
from .model_dir import ModelDirError

log = logging.getLogger("kokoro_server")

EXIT_BAD_MODEL = 2


def load(settings: Settings):
    """Return ``synth_factory`` for the app, with the engine loaded and warmed up now."""
    from .engines import load_engine
    from .model_dir import open_model_dir
    from .synth import Synthesizer

    started = time.perf_counter()
    model = open_model_dir(settings.model_dir, engine=settings.engine)
    engine = load_engine(model, device=settings.device)
    log.info("loaded %s engine on %s from %s with %d voices in %.1fs", engine.name, engine.device,
             model.root, len(model.voices), time.perf_counter() - started)

    def factory(scheduler):
        synth = Synthesizer(engine=engine, voices=model.voices, scheduler=scheduler,
                            default_voice=settings.default_voice)
        if settings.warmup:
            began = time.perf_counter()
            synth.warm_up()
            log.info("warmed up in %.1fs", time.perf_counter() - began)
        return synth

    return factory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="serve", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="serve", choices=["serve"],
                        help="SageMaker runs the image as `docker run IMAGE serve`")
    parser.add_argument("--host", default=None, help="bind address (KOKORO_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (PORT, default 8080)")
    parser.add_argument("--model-dir", default=None, help="model directory (KOKORO_MODEL_DIR)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    env = None
    if args.model_dir:
        import os

        env = dict(os.environ, KOKORO_MODEL_DIR=args.model_dir)
    try:
        settings = Settings.from_env(env)
        factory = load(settings)
    except (ConfigError, ModelDirError) as exc:
        print(f"kokoro-server: cannot start: {exc}", file=sys.stderr)
        return EXIT_BAD_MODEL
    from .app import create_app

    app = create_app(settings=settings, synth_factory=factory)
    uvicorn.run(
        app,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level="info",
        ws_max_size=1024 * 1024,  # frames over our 64 KiB limit get an error frame, not a dropped socket
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        timeout_keep_alive=75,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
