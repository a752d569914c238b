# `make quickstart`: install ga (and bubblewrap, which code_run needs, when it is missing) and run the
# main job offline. `make test`: install what the tests need (Chromium and bubblewrap from the
# package manager when missing, the package with its dev extra), lint with ruff and run the whole suite.
PYTHON ?= python3

.PHONY: quickstart test browser sandbox install
quickstart: sandbox
	$(PYTHON) -m pip install -q .
	ga fanout configs/examples/quickstart.yaml

test: browser sandbox install
	$(PYTHON) -m ruff check .
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 $(PYTHON) -m pytest

install:
	$(PYTHON) -m pip install -q -e '.[dev]'

browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || \
	  { if command -v apt-get >/dev/null; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium); \
	    else echo "no Chromium found: install one (see README, 'Getting a browser')" >&2; exit 1; fi; }

sandbox:
	@command -v bwrap >/dev/null || \
	  { if command -v apt-get >/dev/null; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) || (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap); \
	    else echo "no bubblewrap found: install it (see README, 'Sandbox')" >&2; exit 1; fi; }
