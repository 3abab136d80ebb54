"""The glue one notebook needs, one module per notebook (DESIGN.md "lessons/"): real_vllm (notebook 12)."""
