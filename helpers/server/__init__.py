"""The mock OpenAI-compatible server: the engine driven in real time behind FastAPI (notebooks 04 to 10).

``app`` builds the FastAPI app, ``launcher`` starts it (a thread for notebooks, a subprocess for tests),
``driver`` runs the engine's step loop on absolute deadlines, ``prometheus`` serves ``/metrics`` with vLLM's
names. Import the submodules; this package exports nothing, so ``import helpers.server`` stays light.
"""
