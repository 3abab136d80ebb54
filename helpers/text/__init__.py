"""Token counting and text generation shared by the mock server and the benchmark harness.

``tokenizer`` is the course's deterministic tokenizer (the mock counts prompts with it, the harness sizes
prompts with it); ``textgen`` writes on-topic text of an exact token length. Pure: no server, no I/O, so the
measuring code never needs the mock's internals.
"""
