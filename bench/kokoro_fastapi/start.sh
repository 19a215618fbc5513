#!/usr/bin/env bash
# Start Kokoro-FastAPI in the foreground on 127.0.0.1:PORT, offline, on the CPU, serving a local
# Kokoro torch model directory (config.json, one .pth, voices/*.pt), as its CPU container does
# (docker/cpu/Dockerfile and docker-compose.yml: the same settings, other paths).
#   usage: start.sh CHECKOUT MODEL_DIR PORT        (CHECKOUT prepared by setup.sh)
set -euo pipefail
CHECKOUT="$(realpath "${1:?usage: start.sh CHECKOUT MODEL_DIR PORT}")"
MODEL_SRC="$(realpath "${2:?usage: start.sh CHECKOUT MODEL_DIR PORT}")"
PORT="${3:?usage: start.sh CHECKOUT MODEL_DIR PORT}"
VENV="$CHECKOUT/.bench-venv"
[ -f "$VENV/.installed" ] || { echo "start.sh: run bench/kokoro_fastapi/setup.sh $CHECKOUT first" >&2; exit 2; }
[ -f "$MODEL_SRC/config.json" ] && [ -d "$MODEL_SRC/voices" ] || { echo "start.sh: $MODEL_SRC needs config.json and voices/" >&2; exit 2; }
mapfile -t weights < <(ls "$MODEL_SRC"/*.pth 2>/dev/null)
[ "${#weights[@]}" -eq 1 ] || { echo "start.sh: need exactly one .pth in $MODEL_SRC" >&2; exit 2; }

# Kokoro-FastAPI reads MODEL_DIR/v1_0/kokoro-v1_0.pth and its config.json (a fixed path), so the
# model's files are linked into a staging directory of that shape; voices are read in place.
RUN="$(mktemp -d "${TMPDIR:-/tmp}/kokoro-fastapi.XXXXXX")"
trap 'rm -rf "$RUN"' EXIT
mkdir -p "$RUN/models/v1_0" "$RUN/tmp"
ln -s "$MODEL_SRC/config.json" "$RUN/models/v1_0/config.json"
ln -s "${weights[0]}" "$RUN/models/v1_0/kokoro-v1_0.pth"

# It caches each voice as $TMPDIR/temp_voice_<name>.pt and reuses the file when it exists: a
# TMPDIR of its own keeps another model's voice from being picked up.
export TMPDIR="$RUN/tmp"
export PYTHONUNBUFFERED=1 PYTHONPATH="$CHECKOUT:$CHECKOUT/api"
export USE_GPU=false DEVICE=cpu API_LOG_LEVEL=INFO HOST=127.0.0.1 PORT
export MODEL_DIR="$RUN/models" VOICES_DIR="$MODEL_SRC/voices" WEB_PLAYER_PATH="$CHECKOUT/web"
# espeak-ng: the container's Debian package; here the library in the espeakng-loader wheel
# (the one misaki itself loads).
export PHONEMIZER_ESPEAK_LIBRARY="$("$VENV/bin/python" -c 'import espeakng_loader as e; print(e.get_library_path())')"
export PHONEMIZER_ESPEAK_DATA="$("$VENV/bin/python" -c 'import espeakng_loader as e; print(e.get_data_path())')"
export ESPEAK_DATA_PATH="$PHONEMIZER_ESPEAK_DATA"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # every file is local; a download would be a bug
cd "$CHECKOUT"  # its temp_file_dir and .env lookup are relative to the working directory, as in /app
"$VENV/bin/python" -m uvicorn api.src.main:app --host 127.0.0.1 --port "$PORT" --log-level info &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER; rm -rf "$RUN"' EXIT TERM INT
wait $SERVER
