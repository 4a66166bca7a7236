# Quick start: `make demo` runs the durable showcase, `make test` runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The web UI's browser tests run Debian's Chromium (never a downloaded browser).
CHROMIUM := /usr/bin/chromium
# The PostgreSQL tests need a server: this machine's unless the environment names
# another (.ci/run starts it). Each test worker creates and drops databases of its own.
DURABLE_FLOW_TEST_PG_DSN ?= postgresql://postgres@127.0.0.1:5432/test
export DURABLE_FLOW_TEST_PG_DSN
# The tests run in parallel (pytest-xdist), more workers than cores: most of their time
# is spent waiting (PostgreSQL, child processes, timers), not computing. worksteal hands
# the tests still queued on a busy worker to an idle one, so the long ones spread out.
# Twice the cores of a two-core machine: more starve the lease renewals of the tests
# that time them (a renewal late by a second under load fails a run by design).
TEST_WORKERS ?= 4
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal
# Their temporary files (SQLite databases that fsync every commit, copies of them) go to
# tmpfs when the machine has one; `make test TEST_TMPDIR=/tmp` keeps them on disk.
TEST_TMPDIR ?= $(shell test -d /dev/shm -a -w /dev/shm && echo /dev/shm || echo /tmp)
# Bytecode is cached even where the environment turns that off (PYTHONDONTWRITEBYTECODE):
# otherwise every worker and every child interpreter compiles durable_flow again.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test test-fast test-model lint docs bench bench-fleet bench-long bench-startup bench-crash bench-stream bench-parked bench-loads bench-bulk bench-scale clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@# setuptools notes that an editable install of a package with a mapped folder
	@# (migrations/ ships as durable_flow._migrations) may be shadowed by folders of
	@# the same name; nothing here is, so that one note is not printed
	@# --no-compile: a module's bytecode is written when it is first imported (the tests
	@# import a fraction of what is installed; compiling all of it took longer than that)
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -q --no-compile -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/showcase.py

$(CHROMIUM):
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

# Everything: ruff, mypy and every test (none skipped, none deselected).
# mypy checks on one core while the tests run (they leave a core idle often enough); its
# report follows theirs, and either failing fails the target. Before the workers start,
# the tests are collected once: that writes the bytecode of durable_flow, its dependencies
# and the test files (pytest rewrites their asserts), which every test worker would
# otherwise compile for itself on a fresh clone.
test: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m ruff check durable_flow tests examples
	@$(BIN)/python -m mypy durable_flow >$(VENV)/mypy.log 2>&1 & checking=$$!; \
	  TMPDIR=$(TEST_TMPDIR) $(BIN)/python -m pytest -q --collect-only -p no:cacheprovider >/dev/null 2>&1; \
	  echo "$(PYTEST)"; TMPDIR=$(TEST_TMPDIR) $(PYTEST); tested=$$?; \
	  wait $$checking; checked=$$?; echo "mypy durable_flow:"; cat $(VENV)/mypy.log; \
	  test $$tested -eq 0 -a $$checked -eq 0

# The behaviour tests only: no child process, browser, crash or fleet. About 2.5 minutes
# on a 2-core machine, where they are CPU-bound (the test workers and PostgreSQL keep both
# cores busy); run one file or -k for a quicker loop.
test-fast: $(STAMP)
	TMPDIR=$(TEST_TMPDIR) $(PYTEST) -m "not process"

# The model-based test of waits="branch" (tests/engine/test_model_waits.py) with many
# more generated graphs, answer orders and kills than the suite's few: 500 examples on
# each of memory, SQLite and PostgreSQL (about ten minutes; no per-test time limit).
test-model: $(STAMP)
	HYPOTHESIS_PROFILE=waits-model TMPDIR=$(TEST_TMPDIR) $(BIN)/python -m pytest -q -p no:cacheprovider \
	  --timeout=0 tests/engine/test_model_waits.py

# The user guide and the API reference (from the docstrings) into site/; any
# warning (a broken link, an unknown name) fails the build.
docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/python -m ruff check durable_flow tests examples bench
	$(BIN)/python -m mypy durable_flow

bench: $(STAMP)
	$(BIN)/python -m pip install -q -r bench/requirements.txt
	$(BIN)/python bench/run.py

# Worker processes on PostgreSQL (this machine's server unless the environment names
# another: DURABLE_FLOW_BENCH_PG_DSN) and SQLite; writes its section of bench/RESULTS.md.
bench-fleet: $(STAMP)
	$(BIN)/python -m pip install -q -r bench/requirements-fleet.txt
	$(BIN)/python bench/fleet.py

# Bulk retry of 1,000 failed runs on PostgreSQL (DURABLE_FLOW_BENCH_PG_DSN's server);
# writes its section of bench/RESULTS.md.
bench-bulk: $(STAMP)
	$(BIN)/python bench/bulk.py

# Runs of up to 50,000 supersteps: cost per superstep, loads, history pages, reads beside
# commits (and LangGraph at 1k/5k); writes its section of bench/RESULTS.md (under 12 min).
bench-long: $(STAMP)
	$(BIN)/python -m pip install -q -r bench/requirements.txt
	$(BIN)/python bench/longrun.py

# One run of 1,000,000 supersteps on SQLite and 200,000 on PostgreSQL (a database it
# creates on DURABLE_FLOW_BENCH_PG_DSN's server and drops): cost per superstep, head loads,
# storage, history pages, prune, a small run beside a reader (DESIGN.md "One run, a million
# supersteps"); each build stops at its time budget (11 and 4.5 min), the figures at the N it
# reached; writes its section of bench/RESULTS.md (under 20 min). Quick look:
# `.venv/bin/python bench/scale.py --supersteps 2000 --pg-supersteps 2000 --out /tmp/x`.
bench-scale: $(STAMP)
	$(BIN)/python bench/scale.py

# import durable_flow and `durable-flow runs` in fresh processes (targets 150 / 400 ms);
# writes its section of bench/RESULTS.md (under a minute).
bench-startup: $(STAMP)
	$(BIN)/python bench/imports.py --write

# assert_crash_safe over examples/showcase.py, timed (three calls); writes its section of
# bench/RESULTS.md (target: under a minute).
bench-crash: $(STAMP)
	$(BIN)/python bench/crash_safe.py --write

# One agent run streaming 10,000 chunks with the stream log on and off (target: at most
# 10% more wall time); writes its section of bench/RESULTS.md (about two minutes).
bench-stream: $(STAMP)
	$(BIN)/python bench/streamlog.py --write

# 8 branches, one waiting for an answer given after 1 s: wall time to the join with
# waits="branch" against the default, alternating in one run; writes its section of
# bench/RESULTS.md (about half a minute).
bench-parked: $(STAMP)
	$(BIN)/python bench/parked.py --write

# The DESIGN.md targets side by side in one run: the inbox, long-run loads and the chain
# against LangGraph, PostgreSQL commits, 2 workers against 1, short workflows against DBOS
# Transact (fresh databases on this machine's server unless DURABLE_FLOW_BENCH_PG_DSN names
# another); writes its section of bench/RESULTS.md (under ten minutes).
bench-loads: $(STAMP)
	$(BIN)/python -m pip install -q -r bench/requirements.txt
	$(BIN)/python bench/sidebyside.py

clean:
	rm -rf $(VENV) demo.db demo.log site
