# Two commands do all set-up: `make lab` and `make test` (see README.md).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# JupyterLab refuses to run as root without --allow-root; add it only then.
ROOT_FLAG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

.PHONY: install lab test clean

install: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt -e .
	touch $(STAMP)

lab: install
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG)

test: install
	$(PY) -m pytest

clean:
	rm -rf $(VENV) .pytest_cache results
