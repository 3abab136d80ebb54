"""The mock OpenAI-compatible server: a FastAPI app around simulated engines driven in real time.

Notebook 00 (环境与第一个请求) talks to it; notebook 05 (连续批处理) watches batching through it. Routes, also
under ``/api/v1`` (TaoToken's layout): ``POST /v1/chat/completions``, ``POST /v1/completions``,
``GET /v1/models``; plus ``GET /health`` (200, or 503 when an engine loop is dead; empty bodies, as vLLM's),
``GET /metrics`` (Prometheus, vLLM's names) and ``GET /openapi.json`` (the request bodies' schemas).
Faults come from ``X-Mock-Fault`` (``helpers.server.faults``), applied after the API key check. A request is
checked in this order, each failure answered before any byte of a stream: key (401), fault header (400 if
malformed), content type, body size and fields (``helpers.server.intake``: 400, 413, 400), model (404), engine
alive (500), ``max_tokens`` and prompt against the context (400), vLLM's admission control (503 with vLLM's
body when the config's ``max_num_queued_reqs`` requests are in flight), the mock's own waiting cap (429,
``max_waiting_requests``).

It answers as vLLM 0.32.0 started with ``--enable-prompt-tokens-details`` does (checked against the real
server by ``tests/vllm/test_wire_parity.py``): the error bodies of ``helpers.server.errors`` (vLLM's
``type`` names, ``code`` the status number, ``401 {"error": "Unauthorized"}``); ``max_tokens`` above
``max_model_len`` is a 400 and a prompt plus ``max_tokens`` past the context is served with ``max_tokens``
cut to what is left (``get_max_tokens``, ``vllm/entrypoints/serve/utils/api_utils.py``); a stream puts the
finish reason on its last content chunk, then the usage chunk (``choices: []``), then ``[DONE]``;
``usage.prompt_tokens_details`` is ``{"cached_tokens", "created_cache_tokens", "multimodal_tokens"}`` on
every answer (what that flag gives; without it vLLM sends no ``prompt_tokens_details`` at all, which a
client must read as "the server did not say", not as 0).

Deliberate differences from vLLM 0.32.0:
- the routes are also served under ``/api/v1`` (TaoToken's layout) and ``/api/v1`` needs the key too;
- every completion carries the extra ``timing`` object (the simulated figures and the server's wall clock,
  ``helpers.server.completions``), on the non-streamed body and on a stream's last content chunk;
- ``X-Mock-Fault`` faults (401, 429, 500, disconnect, slow first token, no choices);
- a 429 when the waiting queue is full (``max_waiting_requests``, the classroom's limit), in vLLM's body
  style with ``Retry-After``: vLLM 0.32.0 has no 429; its own admission limit, ``--max-num-queued-reqs``
  (waiting + running), answers 503 ``Service Unavailable`` (``QueueOverflowError``, ``vllm/exceptions.py``);
- a 413 above ``max_body_bytes`` (vLLM reads any body);
- a dead engine also answers ``/health`` 503 but the server stays up (vLLM shuts itself down);
- texts, token ids and prompt token counts are the mock's own (its tokenizer, its on-topic sentences);
- requests vLLM serves but the mock refuses with a 400 naming the field: ``n`` > 1, ``echo``, structured
  ``response_format``, ``tools`` with a tool choice (``helpers.server.schemas``); its schema messages are
  pydantic's, worded by the mock, with vLLM's ``type`` (``Bad Request``) and ``param``;
- ``/v1/models`` cards carry ``owned_by: inference-lab-mock``; a body has no ``metrics``,
  ``ec_transfer_params``, ``kv_transfer_params``, ``prompt_logprobs``, ``prompt_token_ids``,
  ``prompt_text``, ``system_fingerprint``, ``service_tier`` (vLLM's extensions and OpenAI's optional fields,
  mostly ``null``);
- an unknown path is vLLM's ``404 {"detail": "Not Found"}``, a wrong method ``405 {"detail": "Method Not
  Allowed"}`` (Starlette's answer, as vLLM's), so the mock's own hint on the right paths is gone.
"""
from __future__ import annotations

import gc
import hmac
import itertools
import json
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from helpers.engine import EngineConfig
from helpers.hardware import GPUSpec
from helpers.server import completions as flow
from helpers.server.driver import EngineDriver
from helpers.server.errors import (
    OpenAIError,
    bad_request,
    engine_unavailable,
    invalid_api_key,
    model_not_found,
    queue_overflow,
    rate_limited,
    server_error,
)
from helpers.server.faults import FAULT_HEADER, Fault, FaultInjector, error_for
from helpers.server.intake import DEFAULT_MAX_BODY_BYTES, Prompt, read_request
from helpers.server.options import MockOptions
from helpers.server.prometheus import CONTENT_TYPE, ServerMetrics
from helpers.server.responses import (
    DroppedResponse,
    SSEResponse,
    quiet_dropped_connections,
    unless_disconnected,
)
from helpers.server.schemas import ChatCompletionRequest, CompletionRequest
from helpers.server.served import ServedModel, build_engines, served_models
from helpers.text.textgen import generate_reply

RETRY_AFTER_S = 1.0  # what a 429 asks the client to wait
_log = logging.getLogger("uvicorn.error")  # the server's log: one line per event, shown at uvicorn's level


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A served model name and the driver of the engine behind it."""

    served: ServedModel
    driver: EngineDriver
    max_model_len: int


class MockService:
    """Everything a request needs: endpoints, auth, faults, queue limit, metrics."""

    def __init__(
        self,
        endpoints: dict[str, Endpoint],
        metrics: ServerMetrics,
        *,
        api_key: str | None,
        faults: FaultInjector,
        max_waiting_requests: int | None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.endpoints = endpoints
        self.metrics = metrics
        self.drivers = list({id(e.driver): e.driver for e in endpoints.values()}.values())
        self._api_key = api_key
        self._faults = faults
        self._max_waiting = max_waiting_requests
        self.max_body_bytes = max_body_bytes
        self._ids = itertools.count()
        self._id_prefix = os.urandom(4).hex()

    def guard(self, request: Request, *, draw_fault: bool) -> Fault | None:
        """Check the API key, then apply the fault header (or a random fault)."""
        if self._api_key is not None:
            scheme, _, key = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                key.strip().encode(), self._api_key.encode()
            ):
                raise invalid_api_key()
        header = request.headers.get(FAULT_HEADER)
        fault = self._faults.choose(header) if draw_fault or header else None
        error = error_for(fault, RETRY_AFTER_S)
        if error is not None:
            raise error
        return fault

    def endpoint(self, model: str) -> Endpoint:
        endpoint = self.endpoints.get(model)
        if endpoint is None:
            raise model_not_found(model, list(self.endpoints))
        return endpoint

    def prepare(
        self,
        endpoint: Endpoint,
        body: ChatCompletionRequest | CompletionRequest,
        prompt: Prompt,
        fault: Fault | None,
        received_wall_s: float,
    ) -> flow.Job:
        """Check the engine, the prompt, the context and the queue, and decide the reply."""
        failure = endpoint.driver.failure
        if failure is not None:
            raise engine_unavailable(failure)
        if not prompt.token_ids:  # vLLM's message (vllm/v1/engine/input_processor.py, _validate_prompt_len)
            raise bad_request("The decoder prompt cannot be empty: send at least one token.", param="prompt")
        max_tokens = flow.check_context(
            len(prompt.token_ids), body.requested_max_tokens(), endpoint.max_model_len, body.max_tokens_param
        )
        self._check_queue(endpoint.driver)
        reply = generate_reply(
            prompt.seed_text,
            max_tokens=max_tokens,
            seed=body.seed,
            temperature=1.0 if body.temperature is None else body.temperature,
            ignore_eos=body.ignore_eos,
            stop=body.stop_strings,
            reasoning=endpoint.served.reasoning,
        )
        chat = isinstance(body, ChatCompletionRequest)
        prefix = "chatcmpl-" if chat else "cmpl-"
        return flow.Job(
            f"{prefix}{self._id_prefix}{next(self._ids):x}",
            endpoint.served.name,
            chat,
            prompt.token_ids,
            reply,
            body.include_usage,
            fault,
            received_wall_s,
            body.num_top_logprobs,
        )

    def _check_queue(self, driver: EngineDriver) -> None:
        cap = driver.engine.config.max_num_queued_reqs
        if cap is not None:  # vLLM 0.32.0 AsyncLLM.check_admission: in flight + 1 > cap -> 503
            stats = driver.engine.stats()
            if stats.num_running + stats.num_waiting + driver.num_pending + 1 > cap:
                raise queue_overflow()
        if self._max_waiting is None:
            return
        waiting = driver.engine.stats().num_waiting + driver.num_pending
        if waiting >= self._max_waiting:
            raise rate_limited(
                f"The waiting queue is full ({waiting} requests, limit {self._max_waiting}). "
                f"Retry after {RETRY_AFTER_S:g} s or send fewer requests at once.",
                RETRY_AFTER_S,
            )


def load_config(config: EngineConfig | str | Path | None) -> EngineConfig:
    """An EngineConfig from an object, a vLLM YAML path, or None (vLLM's defaults)."""
    if config is None:
        return EngineConfig()
    if isinstance(config, EngineConfig):
        return config
    return EngineConfig.from_yaml(config)


def create_app(
    config: EngineConfig | str | Path | None = None,
    gpu: GPUSpec | str = "a100-80gb",
    *,
    options: MockOptions | None = None,
    **fields: Any,
) -> FastAPI:
    """Build the mock app (engines are created now; their real-time loops start with the app). How it
    answers is ``MockOptions``: each field as a keyword (``api_key=..., time_scale=...``), or ``options=``."""
    opts = MockOptions.of(options, fields)
    if opts.max_body_bytes < 1024:
        raise ValueError(f"max_body_bytes must be at least 1024, got {opts.max_body_bytes}")
    engine_config = load_config(config)
    models = served_models(engine_config, opts.served_model_names)
    engines = build_engines(engine_config, gpu, models)
    drivers: dict[int, EngineDriver] = {}
    by_name: dict[str, EngineDriver] = {}
    for served in models:  # one driver per engine, labelled in /metrics with its first served name
        engine = engines[served.name]
        if id(engine) not in drivers:
            drivers[id(engine)] = by_name[served.name] = EngineDriver(engine, time_scale=opts.time_scale)
    metrics = ServerMetrics(by_name)
    for name, driver in by_name.items():
        driver.observer = metrics.observer(name)
    endpoints = {
        m.name: Endpoint(m, drivers[id(engines[m.name])], engines[m.name].max_request_len)
        for m in models
    }
    service = MockService(
        endpoints,
        metrics,
        api_key=opts.api_key,
        faults=FaultInjector(opts.fault_rate, opts.fault_seed),
        max_waiting_requests=opts.max_waiting_requests,
        max_body_bytes=opts.max_body_bytes,
    )
    quiet_dropped_connections()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        for driver in service.drivers:
            driver.start()
        # Objects alive at start-up (the app, the engines, imported modules) move to the GC's permanent
        # generation: a full collection would otherwise walk them all and stall every stream for 20-70 ms.
        gc.freeze()
        yield
        gc.unfreeze()
        for driver in service.drivers:
            await driver.stop()

    app = FastAPI(title="Inference Lab mock OpenAI server", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.mock = service
    _add_routes(app, service)
    _add_error_handlers(app)
    _publish_request_schemas(app)
    return app


def _add_routes(app: FastAPI, service: MockService) -> None:
    router = APIRouter()

    async def complete(
        request: Request, model: type[ChatCompletionRequest] | type[CompletionRequest]
    ) -> Response:
        received = time.perf_counter()
        fault = service.guard(request, draw_fault=True)
        body, prompt = await read_request(request, model, service.max_body_bytes)
        endpoint = service.endpoint(body.model)
        job = service.prepare(endpoint, body, prompt, fault, received)
        if body.stream:
            return SSEResponse(flow.stream_events(job, endpoint.driver), {"X-Request-Id": job.response_id})
        completed, result = await unless_disconnected(
            request, lambda: flow.run_to_completion(job, endpoint.driver)
        )
        if not completed:
            return Response(status_code=204)  # the client has gone; nobody reads this
        if result is None:
            return DroppedResponse()
        return Response(
            json.dumps(result, ensure_ascii=False),
            media_type="application/json",
            headers={"X-Request-Id": job.response_id},
        )

    @router.post("/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await complete(request, ChatCompletionRequest)

    @router.post("/completions")
    async def completions(request: Request) -> Response:
        return await complete(request, CompletionRequest)

    @router.get("/models")
    async def models(request: Request) -> Response:
        service.guard(request, draw_fault=False)
        created = int(time.time())
        data = [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "inference-lab-mock",
                "root": e.served.model or e.driver.engine.config.model,
                "max_model_len": e.max_model_len,
            }
            for name, e in service.endpoints.items()
        ]
        return JSONResponse({"object": "list", "data": data})

    app.include_router(router, prefix="/v1")
    app.include_router(router, prefix="/api/v1")

    @app.get("/health")
    async def health() -> Response:
        failures = [d.failure for d in service.drivers if d.failure is not None]
        if failures:
            return Response(status_code=503)  # vLLM's /health: no body either way
        return Response(status_code=200)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> Response:
        # A learner's kernel stopped or its request timed out while the body was on its way: an ordinary
        # event in a room, worth one line in the instructor's terminal, not a 70-line traceback.
        client = f"{request.client.host}:{request.client.port}" if request.client else "?"
        _log.warning("Client %s disconnected before its request body arrived (%s %s): nothing to answer",
                     client, request.method, request.url.path)
        return Response(status_code=204)  # nobody reads it

    @app.exception_handler(OpenAIError)
    async def openai_error(request: Request, exc: OpenAIError) -> Response:
        return exc.to_response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # vLLM 0.32.0 answers a path it does not route as Starlette does: {"detail": "Not Found"}
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=dict(exc.headers or {}))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        # Starlette re-raises the exception after this response and uvicorn then closes the connection:
        # say so, so that a keep-alive client opens a new one instead of meeting a reset.
        error = server_error(f"Unexpected error in the mock server: {exc!r}. Please report it.")
        error.headers["Connection"] = "close"
        return error.to_response()


def _publish_request_schemas(app: FastAPI) -> None:
    """Make ``/openapi.json`` describe the JSON bodies the completion routes read (they parse the raw body
    themselves, so that every validation problem is an OpenAI-shaped 400 rather than FastAPI's 422)."""
    models: dict[str, type[BaseModel]] = {"/chat/completions": ChatCompletionRequest,
                                          "/completions": CompletionRequest}
    inputs: list[tuple[type[BaseModel], Literal["validation"]]] = [(m, "validation") for m in models.values()]

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            refs, defs = models_json_schema(inputs, ref_template="#/components/schemas/{model}")
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
            for path, operations in schema["paths"].items():
                model = next((m for suffix, m in models.items() if path.endswith(suffix)), None)
                if model is not None and "post" in operations:
                    operations["post"]["requestBody"] = {
                        "required": True,
                        "content": {"application/json": {"schema": refs[(model, "validation")]}},
                    }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the schema
