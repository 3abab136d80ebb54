"""ipywidgets panels used by the notebooks, one module per topic; the math lives in the pure layers."""
