"""The Kokoro server with comparison variants injected (bench/variants.py): ``python -m
bench.variant_server serve ...`` takes the server's arguments; ``KOKORO_BENCH_VARIANTS`` names the
variants. The server's modules are the production ones; only the scheduler and synthesizer classes
they build are replaced, in this process, before the server starts."""

from __future__ import annotations

import os
import sys

from . import variants as v


def inject(names: frozenset[str]) -> None:
    """Make the server build its scheduler and synthesizer with ``names``."""
    import kokoro_server.app as app
    import kokoro_server.synth as synth

    vars(app)["Scheduler"] = v.scheduler_class(names)  # what create_app builds
    vars(synth)["Synthesizer"] = v.synthesizer_class(names)  # __main__.load imports it when it runs


def main(argv: list[str] | None = None) -> int:
    try:
        names = v.parse(os.environ.get(v.ENV, ""))
    except ValueError as error:
        print(f"bench.variant_server: {error}", file=sys.stderr)
        return 2
    inject(names)
    from kokoro_server.__main__ import main as serve

    return serve(argv)


if __name__ == "__main__":
    raise SystemExit(main())
