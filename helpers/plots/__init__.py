"""Matplotlib figures used by the notebooks, one module per topic (pure drawing, no measuring)."""
