"""Which server a notebook measures: the one switch, read in this one place (notebook 00 §2 "用哪个后端").

Backend kinds, chosen by ``backend_kind(env)`` in this order:

* ``taotoken``: ``TAOTOKEN_API_KEY`` set (environment or ``.env``) → ``TAOTOKEN_BASE_URL`` with
  ``TAOTOKEN_MODEL``.
* ``room``: ``INFERENCE_LAB_MOCK_URL`` set → a mock already running elsewhere: the instructor's classroom
  server
  (the learner's key in ``INFERENCE_LAB_MOCK_KEY``), or the one the test session starts for all notebooks.
  Everyone measures the same engine; the notebooks read its time scale from its ``/metrics``.
* ``vllm-local``: ``INFERENCE_LAB_BACKEND=vllm`` (environment or ``.env``; after ``make vllm``) → real vLLM on
  this machine serving the course's tiny model (``helpers.vllm_local``): one server per engine configuration,
  the course's YAML adapted to the CPU, started on first use (30–90 s) and stopped with the kernel. A real
  server: no engine clock, times in real seconds. This explicit choice wins over the others.
* ``own-mock``: nothing set → a mock started in this process on first use (``get_backend``), or one per engine
  configuration a notebook asks for (``measuring_target``); they stop with the kernel. With
  ``INFERENCE_LAB_FORBID_INPROCESS_MOCK=1`` (the test session) ``get_backend`` refuses to start one.

``get_backend()`` gives the settings of the notebook's main server; ``measuring_target(config, ...)`` gives a
notebook the server to measure for a given engine configuration: its own mock of that configuration, or the
room's server when the room serves it (the room runs one engine, config B on an A100 (``ROOM_CONFIG``): a
what-if on another configuration then runs on the engine's clock only, ``Target.private`` is False). Either
way the loopback addresses are added to ``NO_PROXY`` so clients a learner builds reach the mock despite
proxy variables.

A new kind (the local real vLLM, say) is one ``_connect_...`` function returning a ``Target`` and one line in
``backend_kind`` and ``_CONNECT``: the notebooks ask only ``Target`` questions (``private``, ``engine_clock``,
``time_scale``, ``ready()``).
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx

from .proxies import bypass_proxy_for_loopback
from .settings import MOCK_API_KEY, Settings, dotenv_values, load_settings, mask_secret
from .urls import is_loopback_host, normalize_base_url

if TYPE_CHECKING:
    from helpers.server.launcher import MockServer

BACKEND_ENV = "INFERENCE_LAB_BACKEND"  # "vllm": the local real vLLM (notebook 12, make vllm)
MOCK_URL_ENV = "INFERENCE_LAB_MOCK_URL"
MOCK_KEY_ENV = "INFERENCE_LAB_MOCK_KEY"  # a learner's key for a classroom server (helpers.server.classroom)
FORBID_ENV = "INFERENCE_LAB_FORBID_INPROCESS_MOCK"
MOCK_CONFIG = Path(__file__).resolve().parents[2] / "data" / "vllm" / "config_b.yaml"
MOCK_GPU = "a100-80gb"
MOCK_SERVED_MODELS = ("local-13b", "local-r1:reasoning")  # the articles' model ID, and a reasoning-style one
# The room's server (docs/workshop.md's `serve` command, the test session's server): one engine, config B on
# an A100, serving MOCK_SERVED_MODELS, at ROOM_TIME_SCALE wall seconds per simulated second.
ROOM_CONFIG, ROOM_GPU, ROOM_TIME_SCALE = MOCK_CONFIG, MOCK_GPU, 0.1
ROOM_SERVE_ARGS = ("--time-scale", f"{ROOM_TIME_SCALE:g}", "--served-model-name", *MOCK_SERVED_MODELS)

_lock = threading.Lock()
_mock: MockServer | None = None
_vllm: dict[str, Any] = {}  # config file -> this kernel's real vLLM server for it


def _inprocess_mock() -> MockServer:
    """The mock of this kernel: started on first use (daemon thread, ~0.1 s), then reused."""
    global _mock
    with _lock:
        if _mock is None:
            from helpers.server.launcher import start_mock_server

            _mock = start_mock_server(MOCK_CONFIG, MOCK_GPU, served_model_names=MOCK_SERVED_MODELS)
        return _mock


def list_served_models(base_url: str, api_key: str = MOCK_API_KEY, timeout_s: float = 10.0) -> list[str]:
    """Model IDs from ``GET {base_url}/models`` (proxy variables ignored for loopback hosts)."""
    local = is_loopback_host(httpx.URL(base_url).host)
    response = httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"},
                         timeout=timeout_s, trust_env=not local)
    response.raise_for_status()
    return [model["id"] for model in response.json()["data"]]


def wants_local_vllm(env: Mapping[str, str], dotenv_path: str | Path | None = None) -> bool:
    """``INFERENCE_LAB_BACKEND=vllm`` in the environment or in ``.env``."""
    value = env.get(BACKEND_ENV) or dotenv_values(env, dotenv_path)[0].get(BACKEND_ENV, "")
    return value.strip().lower() == "vllm"


def local_vllm(config: Any = ROOM_CONFIG) -> Any:
    """This kernel's real vLLM for a course YAML (started on first use, reused after; ``make vllm`` first)."""
    from helpers.vllm_local import VllmStartError, start_vllm, tiny_options, vllm_status  # noqa: PLC0415

    key = str(config)
    with _lock:
        server = _vllm.get(key)
        if server is None or server.process.poll() is not None:
            status = vllm_status()
            if not status.installed:
                raise VllmStartError(status.message)
            # the tiny model's full context: notebook 04 sends prompts of up to 2048 tokens plus a reply
            server = start_vllm(tiny_options(config, max_model_len=4096), name=f"kernel-{Path(key).stem}")
            _vllm[key] = server
        return server


def backend_kind(env: Mapping[str, str] | None = None, dotenv_path: str | Path | None = None) -> str:
    """``vllm-local``, ``taotoken``, ``room`` or ``own-mock``: which backend the notebooks measure."""
    env = os.environ if env is None else env
    if wants_local_vllm(env, dotenv_path):
        return "vllm-local"
    if load_settings(env, dotenv_path).backend == "taotoken":
        return "taotoken"
    if env.get(MOCK_URL_ENV, "").strip():
        return "room"
    return "own-mock"


def get_backend(env: Mapping[str, str] | None = None, dotenv_path: str | Path | None = None, *,
                mock: bool = False) -> Settings:
    """Settings for the backend in use: TaoToken with a key, else the mock (with its URL and first model).

    ``mock=True``: the mock even when a key is set (notebook 07 makes its errors happen on the mock, then
    checks the learner's own settings separately). Never raises because the room's server cannot be reached
    or refuses the key: the settings then name the room's usual first model, and the notebook's first request
    explains what went wrong (``first_request``) and can simply be run again when the server is back."""
    env = os.environ if env is None else env
    settings = load_settings(env, dotenv_path)
    if not mock and wants_local_vllm(env, dotenv_path):
        server = local_vllm()
        return Settings(backend="vllm", base_url=server.base_url, model=server.model,
                        source=f"{BACKEND_ENV}=vllm（本机的真实 vLLM，内核退出时随之停止）")
    if settings.backend == "taotoken":
        if not mock:
            return settings
        settings = Settings(backend="mock", base_url=None, model=None,
                            source="mock（已设置 TAOTOKEN_API_KEY，但这里要用 mock）")
    bypass_proxy_for_loopback()
    external = env.get(MOCK_URL_ENV, "").strip()
    key = env.get(MOCK_KEY_ENV, "").strip() or None
    if external:
        fix = normalize_base_url(external)
        base_url = fix.url
        source = f"{MOCK_URL_ENV}（已在运行的 mock：教室服务器或测试用的 mock）"
    elif env.get(FORBID_ENV) == "1":
        raise RuntimeError(
            f"{FORBID_ENV}=1 forbids starting a mock in this process, and {MOCK_URL_ENV} is not set: "
            "start one with `python -m helpers serve --port 8000` and export "
            f"{MOCK_URL_ENV}=http://127.0.0.1:8000/v1 (the root conftest does this for test runs)."
        )
    else:
        base_url, source = _inprocess_mock().base_url, "本进程内启动的 mock（内核退出时随之停止）"
    try:
        model = list_served_models(base_url, key or MOCK_API_KEY)[0]
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        if not external:
            raise
        model = MOCK_SERVED_MODELS[0]  # the room's first model; the first request says what is wrong
    return dataclasses.replace(settings, base_url=base_url, model=model, source=source, api_key=key,
                               shared=bool(external))


@dataclass(frozen=True)
class Target:
    """The server one measurement goes to, and what the notebook may do with it.

    ``kind``: a ``backend_kind``. ``private``: a server of this notebook only, started for the engine
    configuration asked for (what-ifs on other configurations may start more); otherwise the server is shared
    or fixed, and what-ifs run on the engine's clock. ``engine_clock``: the server is a mock, which reports
    its engine's timing with each reply and runs at ``time_scale`` wall seconds per simulated second (1 for a
    real server). ``problem``: why the server could not be used (already explained once; see ``ready``)."""

    kind: str
    base_url: str
    model: str
    time_scale: float = 1.0
    api_key: str = field(default=MOCK_API_KEY, repr=False)
    engine_clock: bool = False
    private: bool = False
    server: Any = field(default=None, repr=False, compare=False)
    problem: str | None = None

    @property
    def settings(self) -> Settings:
        """The same connection as ``Settings`` (for ``make_client``, ``diagnose``)."""
        backend: Literal["mock", "taotoken", "vllm"] = (
            "taotoken" if self.kind == "taotoken" else "vllm" if self.kind == "vllm-local" else "mock")
        key = None if self.api_key == MOCK_API_KEY else self.api_key
        return Settings(backend=backend, base_url=self.base_url, model=self.model, api_key=key,
                        source=self.kind, shared=self.kind == "room")

    def describe(self) -> str:
        """One line for the top of a notebook: what it measures."""
        what = {"own-mock": "本内核里的 mock", "room": "教室服务器（大家共用的 mock）",
                "taotoken": "TaoToken", "vllm-local": "本机的真实 vLLM（课程的小模型，CPU）"}
        scale = f"，time_scale {self.time_scale:g}" if self.engine_clock else ""
        key = f"，Key {mask_secret(self.api_key)}" if self.api_key != MOCK_API_KEY else ""
        return f"测量对象：{what.get(self.kind, self.kind)} {self.base_url}，模型 {self.model}{scale}{key}"

    def ready(self) -> bool:
        """True when the server can be measured; otherwise one line (the explanation was printed once)."""
        if self.problem is None:
            return True
        print(f"（跳过本单元：{self.problem}）")
        return False

    def stop(self) -> None:
        """Stop this notebook's own mock (a shared server is left alone)."""
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def room_time_scale(base_url: str, timeout_s: float = 5.0) -> float:
    """The time scale of a running mock, from its ``/metrics`` (``mock_time_scale``)."""
    from .prom import scrape_metrics  # noqa: PLC0415 - only rooms need it

    values = [s.value for s in scrape_metrics(base_url, timeout_s=timeout_s) if s.name == "mock_time_scale"]
    if not values:
        raise ValueError(f"{base_url} 的 /metrics 里没有 mock_time_scale：这不是课程的 mock")
    return values[0]


def _connect_taotoken(request: _Request) -> Target:
    settings = request.settings
    return Target("taotoken", settings.base_url or "", settings.model or "", 1.0, settings.client_api_key)


def _connect_vllm_local(request: _Request) -> Target:
    if request.served_model_names:  # several models behind one server: the local vLLM has only the tiny one
        print("本机的 vLLM 只服务课程的小模型：同时服务几个模型的这一例由本内核里的 mock 演示")
        return _connect_own_mock(request)
    config = request.config if isinstance(request.config, (str, Path)) else ROOM_CONFIG
    try:
        server = local_vllm(config)
    except Exception as error:  # noqa: BLE001 - explained once, here; later cells print one line
        print(f"本机的真实 vLLM 没有启动：{error}")
        return Target("vllm-local", "", "", problem="本机的 vLLM 没有启动，见本 notebook 开头的说明")
    return Target("vllm-local", server.base_url, server.model, 1.0, server.api_key, private=True)


def _connect_room(request: _Request) -> Target:
    env = request.env
    base_url = normalize_base_url(env[MOCK_URL_ENV].strip()).url
    key = env.get(MOCK_KEY_ENV, "").strip() or MOCK_API_KEY
    bypass_proxy_for_loopback()
    problem = None
    try:
        models = list_served_models(base_url, key)
        scale = room_time_scale(base_url)
        if request.model not in models:
            problem = (f"教室服务器没有模型 {request.model}（它有 {', '.join(models)}）："
                       "请讲师按 docs/workshop.md 的命令启动")
    except Exception as error:  # noqa: BLE001 - explained once, here; later cells print one line
        from .diagnose import diagnose  # noqa: PLC0415

        sent_key = None if key == MOCK_API_KEY else key
        found = diagnose(error, Settings("mock", base_url, request.model, sent_key, shared=True))
        print(f"连不上教室服务器 {base_url}：{found.title}。{found.cause}\n怎么办：{found.fix}")
        scale, problem = math.nan, f"教室服务器没有连上（{found.title}），见本 notebook 开头的说明"
    return Target("room", base_url, request.model, scale, key, engine_clock=True, problem=problem)


def _connect_own_mock(request: _Request) -> Target:
    from helpers.server.launcher import start_mock_server  # noqa: PLC0415 - the mock starts only here

    bypass_proxy_for_loopback()
    server = start_mock_server(config=request.config, gpu=request.gpu, time_scale=request.time_scale,
                               served_model_names=request.served_model_names, name=request.name)
    return Target("own-mock", server.base_url, request.model, request.time_scale, engine_clock=True,
                  private=True, server=server)


@dataclass(frozen=True)
class _Request:
    env: Mapping[str, str]
    settings: Settings
    config: Any
    gpu: str
    time_scale: float
    model: str
    served_model_names: Sequence[str] | None
    name: str | None


_CONNECT: dict[str, Callable[[_Request], Target]] = {
    "taotoken": _connect_taotoken, "room": _connect_room, "own-mock": _connect_own_mock,
    "vllm-local": _connect_vllm_local,
}


def measuring_target(config: Any = ROOM_CONFIG, gpu: str = ROOM_GPU, *, time_scale: float = ROOM_TIME_SCALE,
                     model: str = "local-13b", served_model_names: Sequence[str] | None = None,
                     name: str | None = None, env: Mapping[str, str] | None = None,
                     dotenv_path: str | Path | None = None) -> Target:
    """The server a notebook measures for an engine ``config`` on ``gpu`` (notebooks 06, 08, 09, 10).

    Own mock (nothing set): a mock of exactly that configuration, at ``time_scale``, named ``name`` (a rerun
    of the cell stops the previous one). Room: the room's server, whatever was asked (it runs ``ROOM_CONFIG``
    on ``ROOM_GPU``: ask for that one); its time scale is read from it. TaoToken: the learner's model.
    Never raises for an unreachable room: the explanation is printed once and ``Target.ready()`` says so."""
    env = os.environ if env is None else env
    settings = load_settings(env, dotenv_path)
    kind = backend_kind(env, dotenv_path)
    return _CONNECT[kind](_Request(env, settings, config, gpu, time_scale, model, served_model_names, name))


def what_if_target(config: Any, gpu: str = ROOM_GPU, *, time_scale: float = ROOM_TIME_SCALE,
                   model: str = "local-13b", served_model_names: Sequence[str] | None = None,
                   name: str | None = None) -> Target | None:
    """A private server for a what-if on another engine configuration (a mock of it, or with the local real
    vLLM a vLLM of it; a mock when it asks for ``served_model_names``, which the tiny model cannot be), or
    None where the notebook measures a shared server (the room, TaoToken): the what-if then runs on the
    engine's clock only."""
    if backend_kind() not in ("own-mock", "vllm-local"):
        return None
    return measuring_target(config, gpu, time_scale=time_scale, model=model,
                            served_model_names=served_model_names, name=name)


def targets_ready(targets: Mapping[str, Target]) -> bool:
    """True when every target can be measured; otherwise one line (from the first that cannot)."""
    return all(target.ready() for target in targets.values())
