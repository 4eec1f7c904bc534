# flexq: `make demo` runs the guide's flow end to end; `make test` runs the whole suite.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev
HEAVY_TESTS := tests/runtime tests/docs/test_getting_started.py
# The docs site, built strictly: any warning (a broken link or anchor, a page in no table of contents) fails it; -E
# rereads every page, so the reference pages generated from the code are always fresh.
SPHINX := $(BIN)/sphinx-build -E -W --keep-going -n -q -b html docs docs/_build/html

.PHONY: demo test lint typecheck check clean bench bench-full mutate docs screenshots

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(DEVSTAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP) $@

demo: $(STAMP)
	$(BIN)/python -m flexq.demo

test: $(DEVSTAMP)
	$(BIN)/ruff check src tests
	@# Two pytest runs side by side: the tests that start real Ray clusters, one at a time (two at once beside the
	@# light run, on two cores, made their real-clock windows miss; so did the getting-started page's run of the guide
	@# beside them), and the rest of the suite on two workers (pytest-xdist, a file to a worker, the files with tests
	@# marked long first; the crash runs, which kill servers, among them). When the light run is done, a second run of
	@# the Ray tests starts on the core it leaves, from the other end of their list: the two share the files, each
	@# run by whichever claims it first (tests/claims.py). The Ray runs' reports follow the light run's. The type
	@# check and the docs build run beside them too, from the start, their report last. Their temporary folders are
	@# their own: a pytest session starting elsewhere resets the permissions of /tmp/pytest-of-USER, which jobs run as
	@# another user must pass through.
	tmp=$$(mktemp -d /tmp/flexq-test.XXXXXX); claims=FLEXQ_TEST_CLAIMS=$$tmp/claims; \
	{ $(BIN)/mypy && $(SPHINX); } > $$tmp/checks.log 2>&1 & checks=$$!; \
	env $$claims $(BIN)/pytest --basetemp=$$tmp/heavy --durations=15 $(HEAVY_TESTS) > $$tmp/heavy.log 2>&1 & heavy=$$!; \
	$(BIN)/pytest -n 2 --dist loadfile --basetemp=$$tmp/light --durations=25 $(addprefix --ignore=,$(HEAVY_TESTS)); light=$$?; \
	env $$claims FLEXQ_TEST_FROM_END=1 $(BIN)/pytest --basetemp=$$tmp/heavy2 --durations=5 $(HEAVY_TESTS) \
		> $$tmp/heavy2.log 2>&1; second=$$?; \
	wait $$heavy; status=$$?; echo "--- $(HEAVY_TESTS):"; cat $$tmp/heavy.log; \
	echo "--- $(HEAVY_TESTS), from the end, once the rest was done:"; cat $$tmp/heavy2.log; \
	wait $$checks; checked=$$?; echo "--- mypy, docs:"; cat $$tmp/checks.log; \
	rm -rf $$tmp; test $$light -eq 0 && test $$second -eq 0 && test $$status -eq 0 && test $$checked -eq 0

docs: $(DEVSTAMP)
	$(SPHINX)
	@echo "docs/_build/html/index.html"

# Screenshots of the dashboard for the docs (docs/images/), taken in Chromium from a demo server of their own.
screenshots: $(DEVSTAMP)
	$(BIN)/python docs/screenshots.py docs/images

lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests

typecheck: $(DEVSTAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .flexq .pytest_cache .mypy_cache mutants docs/_build
	find src tests -name __pycache__ -prune -exec rm -rf {} +

# Mutation testing of src/flexq/scheduler against tests/scheduler and the fast tests of tests/sim (slow: half an hour on
# two cores; MUTANTS narrows it, e.g. make mutate MUTANTS='flexq.scheduler.preemption*').
MUTANTS ?=
mutate: $(DEVSTAMP)
	$(BIN)/pip install --quiet 'mutmut>=3.3,<4'
	$(BIN)/mutmut run $(MUTANTS)
	$(BIN)/mutmut results

# make bench: every benchmark, at sizes that take about 20 minutes on this 2-core machine; make bench-full adds the
# whole of Kueue's large-scale config through the API (about 5 minutes) and the simulator at full scale (about 30).
bench: $(STAMP)
	$(BIN)/python bench/scheduler_bench.py --rounds 10
	$(BIN)/python bench/tas_preemption_bench.py
	$(BIN)/python bench/tas_preemption_bench.py --fair
	$(BIN)/python bench/sim_bench.py --repeat 2
	$(BIN)/python bench/forecast_bench.py --hours 12
	$(BIN)/python bench/forecast_bench.py --case uniform --seeds 11,12,13,14 --no-cost
	$(BIN)/python bench/ui_bench.py
	$(BIN)/python bench/scale_bench.py --fraction 0.1
	$(BIN)/python bench/server_cpu_bench.py --out bench/results/server-cpu.json
	$(BIN)/python bench/live_baseline.py --virtual
	$(BIN)/python bench/live_baseline.py --workers 2
	$(BIN)/python bench/latency_bench.py
	$(BIN)/python bench/metrics_bench.py
	$(BIN)/python bench/watch_flood_bench.py
	$(BIN)/python bench/live_baseline.py --config large-scale --scale 0.1
	$(BIN)/python bench/execution_bench.py

bench-full: bench
	$(BIN)/python bench/live_baseline.py --config large-scale
	$(BIN)/python bench/scale_bench.py --fraction 1
