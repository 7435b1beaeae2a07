# regionflow build skeleton.  All targets use the project venv in .venv.
SHELL := /bin/bash
.DEFAULT_GOAL := test

PYTHON ?= python3.11
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.installed.stamp

PYTEST_ARGS ?=

# Keep Airflow's state (airflow.cfg, sqlite db, logs) inside the repo, not in ~/airflow.
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__LOAD_EXAMPLES ?= False
# Spark: bind to loopback (else Spark warns and picks eth0's address).
export SPARK_LOCAL_IP ?= 127.0.0.1
# pip-installed spark-submit resolves SPARK_HOME and its Python workers via the
# `python3` on PATH, so put the venv first and name its interpreter explicitly
# (also makes SparkSubmitHook's plain `spark-submit` resolve to the venv's).
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYSPARK_PYTHON := $(CURDIR)/$(VENV)/bin/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VENV)/bin/python
# Bytecode: the venv is installed without compiling (uv's default; pip's --no-compile: compiling all ~12,000 modules
# took 30+ minutes of a clean-clone install on this slow machine, most of them never imported); each module is compiled
# the first time any process imports it and cached under build/pycache (one tree for the venv and this
# checkout, so imports do not litter the sources). A PYTHONDONTWRITEBYTECODE inherited from the shell
# would make every process compile every import again, so it is not passed on.
export PYTHONPYCACHEPREFIX := $(CURDIR)/build/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv constraints bytecode jvm-archive lint test test-quick test-long test-all demo bench docs ui ui-check clean

venv: $(STAMP)

$(VPY):
	$(PYTHON) -m venv $(VENV)

# Re-install only when pyproject.toml or constraints.txt changed (or the venv is new). constraints.txt pins every
# package to the versions the suite was last run with: one candidate each, no backtracking. pip installs
# uv (pinned there too), uv installs the rest: 66 s against pip's 150 s for the same 177 packages in a
# clean clone here on a quiet day (parallel downloads and unpacking; most of what is left is building
# pyspark's 450 MB wheel from its sdist).
# The editable install's build leaves provider/*.egg-info behind; provider/ is on sys.path then, and that
# second copy of the metadata makes Airflow load the plugin and the provider twice: it goes (the
# dist-info in the venv is the metadata).
$(STAMP): pyproject.toml constraints.txt | $(VPY)
	$(VPY) -m pip install --disable-pip-version-check --no-compile -q -c constraints.txt uv
	$(VENV)/bin/uv pip install --python $(VPY) --no-progress -c constraints.txt -e '.[test]'
	rm -rf provider/*.egg-info
	touch $@

# After a change to pyproject.toml's requirements: resolve them afresh in a scratch venv and pin the result.
constraints:
	rm -rf build/constraints-venv
	$(PYTHON) -m venv build/constraints-venv
	build/constraints-venv/bin/python -m pip install --disable-pip-version-check --no-compile -q '.[test,bench,docs]' uv
	{ grep '^#' constraints.txt; build/constraints-venv/bin/python -m pip freeze --exclude-editable \
	  | grep -v '^airflow-provider-regionflow'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf build/constraints-venv

# ruff (ruff.toml: pycodestyle, pyflakes, import order, pyupgrade, bugbear) and mypy (setup.cfg: strict
# checks on core/, scheduling/, store/ and contract.py); tests/test_lint.py runs the same two commands.
lint: venv
	$(VPY) -m ruff check provider tests benchmarks dags plugins docs
	$(VPY) -m mypy provider/regionflow

# regionflow's own modules, compiled before the suite (only what changed since the last run) so that the
# first scheduler, dag-processor, api-server and task processes do not all compile them at once.
bytecode: venv
	$(VPY) -m compileall -q provider dags plugins >/dev/null

# The class-data-sharing archive the suite's spark-submit JVMs (Spark Connect servers, drivers) map their classes
# from (tests/suite_jvm_archive.py): ~45 s once per checkout, JDK and pyspark; a Connect server then starts on
# 0.61x the CPU seconds. tests/conftest.py uses it when it is there.
jvm-archive: venv
	$(VPY) tests/suite_jvm_archive.py >/dev/null

# `make test` is what CI runs: the suite but for the tests marked `long` (tests/conftest.py: scenarios that cost
# minutes each, each with a cheaper sibling in the suite), which `make test-long` runs; `make test-all` runs both.
# `make test-quick`, for the edit loop: the tests not marked `heavy` either (tests/conftest.py marks those that
# start Spark, Airflow, PostgreSQL, Chromium or mypy processes); every test is one or the other.
# `make test` runs the light tests on LIGHT_WORKERS pytest-xdist workers (0: in this process), then the heavy ones
# on HEAVY_WORKERS workers, one test module per worker at a time (--dist loadfile: a module's stack and servers
# stay in one process, and the modules that share a stack go to one worker together, tests/suite_order.py; each
# worker starts the session's Spark server and PostgreSQL once, and the workers share the migrated Airflow
# database). A heavy test mostly waits (heartbeats, polls, JVM starts), so three workers on two cores beat two
# (2026-12-07: 1,035 s on 2 workers; 889 and 992 s on 3 with the suite's JVMs on the serial collector;
# light and heavy tests in one xdist session were no faster: 941 and 1,038 s for both); CONTRIBUTING.md ("Tests")
# has the times.
# The modules go longest first (tests/suite_order.py, by tests/module_seconds.json), not xdist's most-tests-first.
# HEAVY_WORKERS=0 runs them serially in this process. It fails if either part failed (pytest's
# exit code 5, no test selected, counts as passed: PYTEST_ARGS may select tests of one part only). The slowest 20
# listed at the end are the heavy part's (no light test takes 15 s).
PYTEST := $(VPY) -m pytest tests -q -ra --timeout=900 --durations=20
LIGHT_WORKERS ?= 2
LIGHT := $(PYTEST) -n $(LIGHT_WORKERS) -m "not heavy and not long"
HEAVY_WORKERS ?= 3
HEAVY := $(PYTEST) -n $(HEAVY_WORKERS) --dist loadfile --longest-first --no-loadscope-reorder -m "heavy and not long"

test: venv bytecode jvm-archive
	$(LIGHT) $(PYTEST_ARGS); light=$$?; \
	$(HEAVY) $(PYTEST_ARGS); heavy=$$?; \
	for code in $$light $$heavy; do [ $$code = 0 ] || [ $$code = 5 ] || exit $$code; done; \
	[ "$$light$$heavy" != 55 ] || exit 5

test-quick: venv
	$(LIGHT) $(PYTEST_ARGS)

test-long: venv bytecode jvm-archive
	$(PYTEST) -m long $(PYTEST_ARGS)

test-all: venv bytecode jvm-archive
	$(PYTEST) $(PYTEST_ARGS)

DEMO_DIR ?= $(CURDIR)/.demo
DEMO_MODE ?= pointwise-pipelined-only
DEMO_BACKEND ?= session

# The main job: the example DAG through an embedded Airflow (api-server, scheduler, dag-processor and
# triggerer on 127.0.0.1, SQLite) with the RegionExecutor and local Spark (DEMO_BACKEND=session: a Spark
# Connect server per host, each region task a client session on it; submit: a spark-submit per task);
# two logical dates of the daily DAG, each writing its own partition (sink orders_daily/totals/ds={{ ds }});
# then the plain PySpark reference of each date, whose checksum that date's partition's must equal.
demo: venv bytecode
	rm -rf $(DEMO_DIR)
	$(VENV)/bin/regionflow plan dags/orders_daily.py --dag-id orders_daily
	$(VPY) -m regionflow.demo --home $(DEMO_DIR)/airflow --dags-folder $(CURDIR)/dags --slots 3 --backend $(DEMO_BACKEND)
	for day in 2026-01-01 2026-01-02; do \
	  $(VENV)/bin/regionflow run regionflow.examples.orders:daily --reference --slots 2 --logical-date $$day \
	    --data-dir $(DEMO_DIR)/reference || exit $$?; \
	done

bench: venv
	$(VPY) benchmarks/run_all.py

# The documentation site (mkdocs.yml) into build/site, in strict mode (a broken link, a missing page or snippet
# fails), after writing the reference pages generated from the code (docs/reference/: configuration from
# config.OPTIONS, the CLIs from their parsers; tests/test_docs_reference.py fails when they differ from the code).
docs: venv
	$(VPY) docs/reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The UI's bundle (provider/regionflow/ui/static/regionflow.js, committed: a pip install needs no Node) from
# its sources in ui/ (React + TypeScript, Vite, Chakra UI as Airflow's UI provides it): npm ci installs the
# lockfile's versions exactly, the build type-checks first. `make ui-check` (CI) fails when the committed
# bundle is not what the sources build.
BUNDLE := provider/regionflow/ui/static/regionflow.js
ui:
	cd ui && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent

ui-check: ui
	@git diff --quiet -- $(BUNDLE) && [ -z "$$(git status --porcelain -- $(BUNDLE))" ] || \
	  { git status --short -- $(BUNDLE); echo "ui-check: $(BUNDLE) differs from a fresh build of ui/: run make ui and commit it"; exit 1; }

clean:
	rm -rf $(VENV) build dist .pytest_cache .hypothesis .airflow .demo spark-warehouse metastore_db derby.log
	find . -path ./.git -prune -o \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
