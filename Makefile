# Two commands do all set-up: `make lab` and `make test` (see README.md).
# Offline (a workshop without network): `make wheelhouse` once with network, then `make lab OFFLINE=1`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
WHEELHOUSE ?= wheelhouse
# OFFLINE=1: install from $(WHEELHOUSE) only (pip passes the same options to the build of `-e .`).
PIP_SOURCE := $(if $(OFFLINE),--no-index --find-links $(WHEELHOUSE),)
# JupyterLab refuses to run as root without --allow-root; add it only then.
ROOT_FLAG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

.PHONY: install lab test browser-test clean wheelhouse offline-check grader grading-test

install: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(PIP_SOURCE) --upgrade pip
	$(PY) -m pip install --quiet $(PIP_SOURCE) -r requirements.txt -c constraints.txt -e .
	touch $(STAMP)

# Every wheel the course needs for this platform and this $(PYTHON), plus pip and the build backend of `-e .`
# (setuptools), so that `make install OFFLINE=1` needs no network. Copy the folder to a USB stick.
# GRADER=1 adds the grader (nbgrader, requirements-grader.txt) for an offline instructor's machine.
wheelhouse:
	$(PYTHON) -m pip download --quiet -r requirements.txt $(if $(GRADER),-r requirements-grader.txt,) \
	    -c constraints.txt -d $(WHEELHOUSE)
	$(PYTHON) -m pip download --quiet pip "setuptools>=77" -c constraints.txt -d $(WHEELHOUSE)

# Proves the offline install: wheelhouse, a fresh venv installed with --no-index, notebook 00 under nbval.
offline-check:
	tests/offline/check_offline_install.sh

# No news pop-up and no calls home (also right for an offline workshop): no news feed, no update check,
# and the "get official Jupyter news?" prompt pre-answered "no" by an app-level settings override in the venv
# (a learner can still turn news on in Settings).
LAB_FLAGS := --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

lab: install $(LAB_OVERRIDES)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(LAB_FLAGS) $(ROOT_FLAG)

$(LAB_OVERRIDES):
	mkdir -p $(dir $@)
	echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $@

test: install
	$(PY) -m pytest

# Every notebook run in JupyterLab in headless Chromium (tests/browser). Debian's Chromium and CJK fonts come from
# apt (as root, only when missing), Playwright from PyPI; never `playwright install` (it downloads a browser).
CHROMIUM := /usr/bin/chromium
CJK_FONT := /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc
BROWSER_STAMP := $(VENV)/.browser-installed
APT_INSTALL = test "$$(id -u)" = 0 || { echo "not root: sudo apt-get install -y chromium fonts-noto-cjk" >&2; exit 1; }; \
	log=$$(mktemp); export DEBIAN_FRONTEND=noninteractive; \
	{ apt-get update -q && apt-get install -y -q --no-install-recommends $(1); } >$$log 2>&1 \
	  || { cat $$log; rm -f $$log; exit 1; }; rm -f $$log

browser-test: install $(BROWSER_STAMP) $(CHROMIUM) $(CJK_FONT)
	rm -rf results/browser
	$(PY) -m pytest tests/browser --durations=12

$(BROWSER_STAMP): requirements-browser.txt constraints.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-browser.txt -c constraints.txt
	touch $@

$(CHROMIUM):
	@echo "apt-get install chromium fonts-noto-cjk (for the browser test)"
	@$(call APT_INSTALL,chromium fonts-noto-cjk)

$(CJK_FONT):
	@echo "apt-get install fonts-noto-cjk (Chinese text in the browser test)"
	@$(call APT_INSTALL,fonts-noto-cjk)

# The grader, for the instructor (docs/workshop.md §5): nbgrader in the course's .venv, and a kernelspec
# "inference-lab" in the venv that runs this venv's Python, the one autograde uses (helpers/exercises/graded.py
# writes it into nbgrader_config.py): numpy, helpers and the checks are there.
GRADER_STAMP := $(VENV)/.grader-installed
grader: $(GRADER_STAMP)

$(GRADER_STAMP): requirements-grader.txt constraints.txt $(STAMP)
	$(PY) -m pip install --quiet $(PIP_SOURCE) -r requirements-grader.txt -c constraints.txt
	$(PY) -m ipykernel install --sys-prefix --name inference-lab --display-name "Inference Lab (.venv)" >/dev/null
	touch $@

# The graded round trip (generate_assignment -> a submission -> autograde -> feedback), under a minute.
grading-test: $(GRADER_STAMP)
	$(PY) -m pytest tests/grading -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .pytest_cache results
