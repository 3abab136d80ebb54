"""How the mock answers, apart from its engine config and GPU (notebook 00 §"环境与第一个请求").

One frozen object that ``create_app`` builds the app from and that the launcher (``start_mock_server``)
and ``python -m helpers serve`` hand on: each field is also a keyword of those functions
(``start_mock_server(time_scale=0.1, fault_rate=0.2)``), or give them all at once as ``options=``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from helpers.server.intake import DEFAULT_MAX_BODY_BYTES


@dataclass(frozen=True, slots=True)
class MockOptions:
    """``api_key``: require it as ``Authorization: Bearer KEY`` (None: no key). ``time_scale``: wall
    seconds per simulated second (0.1 = ten times faster than the GPU). ``served_model_names``: the model IDs
    to answer to (``NAME[=MODEL][:reasoning]``, ``helpers.server.served``; None: the config's).
    ``max_waiting_requests``: answer 429 with Retry-After when this many requests wait (None: no limit).
    ``fault_rate``, ``fault_seed``: the share of requests given a random fault, and its seed
    (``helpers.server.faults``). ``max_body_bytes``: refuse larger request bodies with 413 (at least 1024)."""

    api_key: str | None = None
    time_scale: float = 1.0
    served_model_names: Sequence[str] | None = None
    max_waiting_requests: int | None = None
    fault_rate: float = 0.0
    fault_seed: int = 0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    @classmethod
    def of(cls, options: MockOptions | None, fields: Mapping[str, Any]) -> MockOptions:
        """``options`` (default: every default) with ``fields`` set; an unknown name is a ``TypeError``."""
        return dataclasses.replace(options or cls(), **fields)
