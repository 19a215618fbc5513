"""``python -m voice_agent``: serve the voice agent (AgentCore Runtime runs it on 0.0.0.0:8080).

Examples::

    python -m voice_agent --tts-url http://127.0.0.1:8080 --port 8090     # local, page at /
    python -m voice_agent --tts-endpoint kokoro-tts --host 0.0.0.0        # AWS (SageMaker TTS)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .config import ConfigError, load_config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voice_agent", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080, AgentCore's)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--tts-url", help="local Kokoro server base URL (env TTS_URL)")
    target.add_argument("--tts-endpoint", help="SageMaker endpoint name (env TTS_ENDPOINT_NAME)")
    parser.add_argument("--offline", action="store_true",
                        help="answer with the scripted offline model (env AGENT_MODEL=offline)")
    page = parser.add_mutually_exclusive_group()
    page.add_argument("--page", dest="page", action="store_true", default=None,
                      help="serve the browser page at / (default: when the TTS target is a local URL)")
    page.add_argument("--no-page", dest="page", action="store_false")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(tts_url=args.tts_url, tts_endpoint=args.tts_endpoint, offline=args.offline, page=args.page)
        if config.model == "bedrock" and os.environ.get("AGENT_MODEL", "").strip().lower() == "bedrock":
            from .model_check import check_bedrock_model

            check_bedrock_model(config)
    except ConfigError as exc:
        print(f"voice_agent: cannot start: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from .app import create_app

    app = create_app(config=config)
    model = f"offline ({config.offline_reason})" if config.model == "offline" else f"bedrock {config.model_id}"
    target = config.tts_url or config.tts_endpoint or "none (text only)"
    logging.getLogger("voice_agent").info("model: %s; TTS: %s; page: %s", model, target, config.serve_page)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=1024 * 1024,
                    timeout_keep_alive=75)
    except KeyboardInterrupt:  # uvicorn shut down cleanly on SIGINT, then raised it again for us
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
