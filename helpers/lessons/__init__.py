"""Lesson glue: what one notebook needs beyond the layers, one module per notebook, named after it.

- 00 setup and first request: ``setup`` (installed packages against requirements.txt)
- 04 streaming, TTFT and TPS: ``streaming`` (streamed vs naive measurement, TTFT vs prompt length)
- 06 vLLM config A vs B: ``config_ab`` (the articles' tables), ``config_ab_launch`` (a YAML as its command)
- 07 troubleshooting: ``troubleshooting`` (the first request, errors diagnosed)
- 08 capacity planning: ``capacity_planning`` (sizing a deployment), ``capacity_planning_log`` (request logs)
- 09 SLO, goodput and cost: ``slo_goodput_cost`` (the multi-turn findings as prose)
- 11 simulator fidelity: ``fidelity`` (the simulator against published benchmarks)
- 12 real vLLM: ``real_vllm`` (configs A and B on vLLM itself, beside the course's calculator and simulator)

Lessons may import any layer; nothing below them imports a lesson (import-linter contracts in pyproject.toml).
"""
