"""Faults on request, so learners can see every failure a real endpoint produces (notebook 07, 排错).

Send the header ``X-Mock-Fault: <kind>[:<value>]`` (checked after the API key; any other value is a 400 that
lists these forms):

==================  =========================================================================================
``401``             401 ``{"error": "Unauthorized"}`` as vLLM (openai.AuthenticationError), even without a key
``429``             429 ``Too Many Requests`` with ``Retry-After`` (openai.RateLimitError after its retries)
``500``             500 ``InternalServerError`` (openai.InternalServerError after its retries)
``disconnect[:N]``  the server drops the connection after N content tokens (default 3, N whole, <= 10⁶): no
                    finish chunk, no ``[DONE]``; a non-streaming request gets no response at all
``slow-first-token[:S]``  the request reaches the engine S simulated seconds late (default 2.0, S <= 3600):
                    TTFT grows by S × time_scale wall seconds
``no-choices``      200 with a body (or a chunk) that has no ``choices`` key, as a misconfigured gateway sends
==================  =========================================================================================

``FaultInjector(rate, seed)`` also picks faults at random for requests without the header: each request
draws from one seeded generator in arrival order, so N requests get the same number of faults in every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from helpers.server.errors import OpenAIError, bad_request, invalid_api_key, rate_limited, server_error

FAULT_HEADER = "x-mock-fault"
KINDS = ("401", "429", "500", "disconnect", "slow-first-token", "no-choices")
RANDOM_KINDS = ("429", "500", "disconnect", "slow-first-token")  # transient faults a client should survive
_DEFAULT_VALUES = {"disconnect": 3.0, "slow-first-token": 2.0}


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault to inject: its kind and parameter (tokens before a disconnect, or seconds of delay)."""

    kind: str
    value: float = 0.0

    @property
    def disconnect_after_tokens(self) -> int | None:
        return int(self.value) if self.kind == "disconnect" else None

    @property
    def first_token_delay_s(self) -> float:
        return self.value if self.kind == "slow-first-token" else 0.0


MAX_DISCONNECT_TOKENS = 1_000_000  # more than any max_model_len: the stream ends first
MAX_DELAY_S = 3600.0  # simulated seconds; at time_scale 1 an hour of waiting is already absurd
_FORMS = (
    f"Use one of: 401, 429, 500, disconnect[:N] (N an integer 0..{MAX_DISCONNECT_TOKENS}), "
    f"slow-first-token[:S] (S simulated seconds, 0..{MAX_DELAY_S:g}), no-choices."
)


def _invalid(header: str, why: str) -> OpenAIError:
    return bad_request(f"X-Mock-Fault {header!r}: {why}. {_FORMS}")


def parse_fault(header: str) -> Fault:
    """Parse an ``X-Mock-Fault`` header value; a bad value is a 400 that lists the valid forms."""
    kind, colon, raw = header.strip().lower().partition(":")
    if kind not in KINDS:
        raise _invalid(header, "unknown fault")
    if not colon:
        return Fault(kind, _DEFAULT_VALUES.get(kind, 0.0))
    if kind not in _DEFAULT_VALUES:
        raise _invalid(header, f"{kind!r} takes no value")
    if kind == "disconnect":
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 7 or int(raw) > MAX_DISCONNECT_TOKENS:
            raise _invalid(header, "N must be a whole number of tokens")
        return Fault(kind, float(int(raw)))
    try:
        value = float(raw)
    except ValueError:
        raise _invalid(header, "S must be a number of seconds") from None
    if not 0.0 <= value <= MAX_DELAY_S:  # also refuses nan and inf
        raise _invalid(header, "S is out of range")
    return Fault(kind, value)


class FaultInjector:
    """Chooses the fault for each request: the header wins; otherwise a seeded draw at ``rate``."""

    def __init__(self, rate: float = 0.0, seed: int = 0, kinds: tuple[str, ...] = RANDOM_KINDS) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"fault rate must be within [0, 1], got {rate}")
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; valid kinds: {', '.join(KINDS)}")
        self.rate = rate
        self.kinds = kinds
        self._rng = random.Random(seed)

    def choose(self, header: str | None) -> Fault | None:
        if header:
            return parse_fault(header)
        if self.rate == 0.0:
            return None
        if self._rng.random() >= self.rate:
            return None
        kind = self._rng.choice(self.kinds)
        return Fault(kind, _DEFAULT_VALUES.get(kind, 0.0))


def error_for(fault: Fault | None, retry_after_s: float) -> OpenAIError | None:
    """The error response a fault answers with before any work is done, if it is an error fault."""
    if fault is None:
        return None
    if fault.kind == "401":
        return invalid_api_key()
    if fault.kind == "429":
        return rate_limited(
            "Rate limit reached (injected by X-Mock-Fault: 429). Retry after the delay "
            "in the Retry-After header.",
            retry_after_s,
        )
    if fault.kind == "500":
        return server_error(
            "The server had an error while processing your request (injected by X-Mock-Fault)."
        )
    return None
