# `make quickstart`: install ga into a virtual environment (.venv in this checkout) and run the main job
# offline. `make test`: install the package with its dev extra there, lint with ruff, type-check the packages
# [tool.pyright] lists with pyright, check the imports for circles and arrows against the package direction
# (bench/import_graph.py) and run the whole suite (with .venv/bin on PATH: tests run `ga` from a task's
# code_run, as a parent agent does).
# `make test-fast`: the same without the tests that start processes, Ray or Chromium, or are slow (markers
# derived in tests/lanes.py). `make test-under-load`: the whole suite beside a CPU hog on every core.
# `make test-installed`: the tests that start `ga`, run against ga installed under /tmp (editable and plain) with
# no PYTHONPATH (tests/installed_lane.py). `make docs`: the user guide (docs/) as a site in site/, offline.
# .ci/run runs `make test` on the system's own python3, `make test-fast` on the oldest and newest supported
# Pythons it finds, `make test-installed` and `make docs` (docs/development.md: Testing).
# Nothing is installed into the system's Python (on Debian and Ubuntu pip refuses to: PEP 668); what the
# system lacks (python3-venv, bubblewrap, Chromium) comes from the package manager, with sudo when not root.
# PYTHON=python3.12 makes the environment with another interpreter; VENV=DIR puts it elsewhere.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: quickstart test test-fast test-under-load test-installed docs dev browser sandbox venv
FAST := not proc and not ray and not browser and not slow

quickstart: sandbox venv
	$(BIN)/python -m pip install -q .
	$(BIN)/ga fanout configs/examples/quickstart.yaml

test: browser sandbox dev
	$(BIN)/python -m ruff check .
	$(BIN)/pyright --pythonpath $(BIN)/python
	$(BIN)/python bench/import_graph.py
	PATH="$(abspath $(BIN)):$$PATH" RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 $(BIN)/python -m pytest

test-fast: dev
	$(BIN)/python -m ruff check .
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 $(BIN)/python -m pytest -q -m "$(FAST)"

test-under-load: browser sandbox dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python bench/under_load.py

test-installed: browser sandbox dev
	$(BIN)/python tests/installed_lane.py

docs: dev
	$(BIN)/mkdocs build

dev: venv
	$(BIN)/python -m pip install -q -e '.[dev]'

# $(call apt_install,PACKAGE,MESSAGE): apt-get install PACKAGE (sudo when not root); without apt-get, MESSAGE.
apt_install = if command -v apt-get >/dev/null; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1); \
	else echo "$(2)" >&2; exit 1; fi

# Made once; later runs find $(BIN)/pip and do nothing. Without python3-venv (Debian: no ensurepip)
# `python3 -m venv` fails half-way: that half-made directory is removed before trying again.
venv: $(BIN)/pip

$(BIN)/pip:
	@$(PYTHON) -m venv $(VENV) >/dev/null 2>&1 || { rm -rf $(VENV); echo "$(PYTHON) -m venv failed: installing python3-venv" >&2; \
	  $(call apt_install,python3-venv,$(PYTHON) -m venv cannot make $(VENV): install the venv module of $(PYTHON)) \
	  && $(PYTHON) -m venv $(VENV); }

browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || \
	  { $(call apt_install,chromium,no Chromium found: install one (docs/configuration.md: Getting a browser)); }

sandbox:
	@command -v bwrap >/dev/null || \
	  { $(call apt_install,bubblewrap,no bubblewrap found: install it (docs/sandbox.md)); }
