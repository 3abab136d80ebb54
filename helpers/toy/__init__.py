"""A tiny numpy transformer with and without KV cache, and the CPU measurements of notebook 01.

Modules: config (sizes, presets), weights (seeded init), model (forward pass), cache (KV cache),
generate (prefill / decode / generate), counts (analytic FLOPs and bytes), probe (this CPU's
bandwidth and FLOP rate), measure (timing the model's phases).
"""
