"""The Kokoro server built with comparison variants (bench/variants.py): ``python -m
bench.variant_server serve ...`` takes the server's arguments; ``KOKORO_BENCH_VARIANTS`` names the
variants. It is the production server, constructed with the variants' classes
(``kokoro_server.__main__.Strategies``): nothing in the server's modules is replaced."""

from __future__ import annotations

import os
import sys

from . import variants as v


def main(argv: list[str] | None = None) -> int:
    try:
        names = v.parse(os.environ.get(v.ENV, ""))
    except ValueError as error:
        print(f"bench.variant_server: {error}", file=sys.stderr)
        return 2
    from kokoro_server.__main__ import main as serve

    return serve(argv, v.strategies(names))


if __name__ == "__main__":
    raise SystemExit(main())
