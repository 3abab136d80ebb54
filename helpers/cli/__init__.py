"""Sub-commands of ``python -m helpers`` (one module each)."""
