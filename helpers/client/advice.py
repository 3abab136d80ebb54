"""The diagnoses ``diagnose`` chooses from: one function per situation, texts in Chinese (notebook 07).

Functions take only the facts they need (never the API key in clear: ``unauthorized`` inspects it to say what
looks wrong, and says so without quoting it).
"""
from __future__ import annotations

from dataclasses import dataclass

from .proxies import PROXY_EXPLANATION
from .settings import MOCK_API_KEY
from .urls import UrlFix


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """``kind`` is a stable id for tests and code; ``title``, ``cause`` and ``fix`` are for people."""

    kind: str
    title: str
    cause: str
    fix: str
    detail: str = ""

    def __str__(self) -> str:
        text = f"【{self.title}】\n原因：{self.cause}\n怎么办：{self.fix}"
        return text + (f"\n原始信息：{self.detail}" if self.detail else "")

    def _repr_markdown_(self) -> str:
        text = f"**{self.title}**\n\n- **原因**：{self.cause}\n- **怎么办**：{self.fix}"
        return text + (f"\n\n原始信息：`{self.detail}`" if self.detail else "")


def key_problem(key: str | None) -> str | None:
    """What is visibly wrong with ``key`` (missing, placeholder, OAuth token, ``Bearer``, spaces), or None.

    Says so without quoting the key.
    """
    if not key:
        return (
            "请求没有带 API Key（没有设置 TAOTOKEN_API_KEY，"
            "或代码读的是另一个变量名，比如 OPENAI_API_KEY）。"
        )
    if key == MOCK_API_KEY:
        return (
            "请求带的是 mock 的占位 Key，也就是没有设置 TAOTOKEN_API_KEY。mock 只在用 --api-key 启动或收到 "
            "X-Mock-Fault: 401 时才返回 401；对 TaoToken 来说，这等于没有带 Key。"
        )
    if key.startswith("eyJ") or key.count(".") == 2:
        return "这个 Key 看起来像 OAuth / JWT 登录令牌（以 eyJ 开头或由三段组成），不是 API Key。"
    if key.lower().startswith("bearer"):
        return "Key 里多写了 `Bearer ` 前缀：SDK 会自己加，结果变成 `Bearer Bearer ...`。"
    if key != key.strip() or any(c.isspace() for c in key):
        return "Key 首尾或中间有空格或换行（复制时带上的）。"
    if not key.isascii():
        return ("Key 里有中文或其他非 ASCII 字符：多半是示例里的占位符（如“你的_TaoToken_Key”）"
                "没有换成真实的 Key。")
    if key[0] in "'\"" or key[-1] in "'\"":
        return "Key 带着引号：.env 里写 TAOTOKEN_API_KEY=sk-...，引号要成对，或干脆不加。"
    return None


def unauthorized(key: str | None) -> Diagnosis:
    problem = key_problem(key) or "Key 不对、已被删除或禁用（服务器回复 Invalid API Key 就是这种情况）。"
    return Diagnosis(
        "unauthorized", "401 未授权：API Key 无效或缺失", problem,
        "在 TaoToken 控制台的 API Keys 页面重新复制 Key，写进 .env 的 TAOTOKEN_API_KEY=..."
        "（不带空格，不加 Bearer）；Claude Code、Cline 等工具的 OAuth 令牌不能当 API Key 用。"
        "用 load_settings().describe() 核对掩码后的 Key 首尾几位是否与控制台一致。",
    )


def missing_key() -> Diagnosis:
    return Diagnosis(
        "missing_key", "没有提供 API Key", "创建 OpenAI 客户端时 api_key 为空，SDK 在发请求前就拒绝了。",
        "用 make_client()（它从 TAOTOKEN_API_KEY 或 .env 读取，没有 Key 时连本地 mock）；"
        "自己创建客户端时传 api_key=...。",
    )


def non_ascii_key() -> Diagnosis:
    return Diagnosis(
        "non_ascii_key", "API Key 里有中文或其他非 ASCII 字符",
        "HTTP 请求头只能是 ASCII；最常见的是把示例里的占位符（如“你的_TaoToken_Key”）原样留在了代码里。",
        "换成控制台生成的真实 Key（形如 sk-...），最好放在 .env 的 TAOTOKEN_API_KEY 中，而不是写进代码。",
    )


def forbidden() -> Diagnosis:
    return Diagnosis(
        "forbidden", "403 禁止访问", "Key 有效，但没有权限使用这个模型或接口（套餐、地区或 Key 权限限制）。",
        "在控制台确认这个 Key 可以调用该模型；换一个模型 ID 试试。",
    )


def model_not_found(model: str | None, status: int = 404) -> Diagnosis:
    which = f"模型 ID `{model}`" if model else "请求里的模型 ID"
    return Diagnosis(
        "model_not_found", f"{status} 模型不存在（The model does not exist / model_not_found）",
        f"地址和 Key 都是对的（服务器认出了接口），但{which}不存在、拼写不对或当前不可用。"
        "TaoToken 对不存在的模型回复 400 The model does not exist，vLLM 和 OpenAI 回复 404。",
        "用 check_settings() 或 client.models.list() 列出服务器上的模型 ID（TaoToken 在控制台的模型广场，"
        "形如 claude-sonnet-4-6），原样复制到 TAOTOKEN_MODEL（注意大小写和连字符）；"
        "自建 vLLM 时它等于 --served-model-name。",
    )


def wrong_path(url: str, fix: UrlFix) -> Diagnosis:
    return Diagnosis(
        "wrong_path", "404 路径不存在：Base URL 不对",
        f"请求发到了 {url}，服务器上没有这个接口。openai SDK 只在 Base URL 后追加 `chat/completions`，"
        "不会自动补 `/v1`，所以 Base URL 必须以 `/v1` 结尾（TaoToken 是 https://taotoken.net/api/v1）。",
        f"把 TAOTOKEN_BASE_URL 设为 {fix.url}（normalize_base_url 会解释每一处修改）。",
    )


def context_too_long() -> Diagnosis:
    return Diagnosis(
        "context_too_long", "400 请求太长：max_tokens 过大或超出上下文长度",
        "prompt 的 token 数 + max_tokens 超过了模型的最大上下文（vLLM 的 max_model_len），服务器直接拒绝。",
        "调小 max_tokens 或缩短 prompt；两者之和要小于模型的上下文长度。",
    )


def bad_request(status: int) -> Diagnosis:
    return Diagnosis(
        "bad_request", f"{status} 请求被拒绝", "服务器认为请求参数有误（字段名、类型或取值不对）。",
        "看下面的原始信息里服务器指出的字段（param），对照接口文档修正。",
    )


def rate_limited(retry_after: str | None, *, quota: bool) -> Diagnosis:
    wait = "服务器没有给出 Retry-After。"
    if retry_after:
        wait = f"服务器建议等待 {retry_after} 秒（Retry-After 响应头）。"
    if quota:
        return Diagnosis(
            "quota_exceeded", "429 额度用完了",
            "Key 有效，但账户的额度或余额已经用完（服务器回复 quota / insufficient_quota）：重试不会好转。",
            "到 TaoToken 控制台查看余额和用量，充值或换一个有额度的 Key；课程的练习也可以先用内置 mock"
            "（删掉 .env 里的 TAOTOKEN_API_KEY 后重启内核）。",
        )
    return Diagnosis(
        "rate_limited", "429 请求过多", "请求太多：超过了速率限制，或服务器的等待队列已满。" + wait,
        "降低并发或请求速率，按 Retry-After 等待后重试；压测时把 429 计入失败率，不要让 SDK 静默重试。",
    )


def server_error(status: int) -> Diagnosis:
    if status == 503:
        return Diagnosis(
            "unavailable", "503 服务暂时不可用",
            "服务方（或它转发到的上游模型）暂时不可用：维护、过载，或这个模型此刻下线了。"
            "不是你的代码或 Key 的问题。",
            "等一会儿再试；持续出现时换一个模型 ID 试试，或记录时间反馈给服务方。压测时把它计入失败率。",
        )
    return Diagnosis(
        "server_error", f"{status} 服务器内部错误",
        "问题在服务器一侧（后端故障、过载或重启中），不是你的代码。",
        "稍后重试；持续出现时记录时间和 request id 反馈给服务方。压测时把它计入失败率。",
    )


def timeout() -> Diagnosis:
    return Diagnosis(
        "timeout", "请求超时",
        "在超时时间内没有连上服务器，或两个 chunk 之间等得太久（服务器排队、网络慢或代理卡住）。",
        "先用短 prompt、小 max_tokens 试一次；确实需要更久时调大 make_client(timeout_s=...)；检查代理设置。",
    )


def disconnected() -> Diagnosis:
    return Diagnosis(
        "disconnected", "流在中途断开",
        "服务器或中间的代理在响应结束前关闭了连接（incomplete chunked read）。",
        "重试这一次请求；频繁出现时检查代理和服务器日志。压测时它是一次失败的请求，不要丢弃不计。",
    )


def deadline_exceeded(deadline_s: float) -> Diagnosis:
    return Diagnosis(
        "deadline_exceeded", "请求超过了总时限",
        f"请求在 {deadline_s:g} 秒的总时限内没有结束：服务器不发数据、只发 `: ping` 保活注释，或生成得极慢。"
        "单次读取的超时管不住一直在发保活注释的服务器，所以另有一个总时限。",
        "确认服务器真的在生成（/metrics、服务器日志）；输出确实很长时调大总时限"
        "（stream_once(deadline_s=...)，python -m helpers bench --deadline）。",
    )


_STREAM_PROBLEMS = {
    "bad_sse": (
        "流里有不是 SSE 的内容",
        "HTTP 200 之后，响应体里出现了既不是 `data:` 行也不是 `:` 注释的内容，或 data 不是 JSON 对象："
        "中间的代理、网关改写了响应，或这个端点不是 OpenAI 兼容的流式接口。",
        "用 curl -N 直接请求同一个地址，看原始响应；绕过代理再试；确认 Base URL 指向 OpenAI 兼容服务。",
    ),
    "truncated_chunk": (
        "流里的一个 chunk 被截断",
        "一行 `data: {...}` 的 JSON 在结束之前就断了：代理或网关按长度截断了行，或服务器写到一半出错。",
        "重试；频繁出现时绕过代理直连服务器，或检查网关的缓冲、行长度设置。",
    ),
    "not_a_stream": (
        "请求了流式，服务器却返回了一个完整的 JSON",
        "请求里有 stream: true，服务器却返回了普通（非流式）的 JSON：它忽略了 stream 参数，"
        "这时测不出 TTFT 和 ITL。",
        "确认服务器支持流式输出（vLLM、TaoToken 都支持）；检查网关是否去掉了 stream 参数。",
    ),
    "line_too_long": (
        "流里有一行长得不正常",
        "一行超过了 1 MiB：正常的 chunk 只有几百字节；继续缓冲只会占满内存，等不到结束。",
        "用 curl -N 看原始响应；这个端点可能不是 OpenAI 兼容的流式接口。",
    ),
}


def bad_stream(kind: str) -> Diagnosis:
    title, cause, fix = _STREAM_PROBLEMS[kind]
    return Diagnosis(kind, title, cause, fix + "压测时它是一次失败的请求。")


def server_error_event(message: str) -> Diagnosis:
    return Diagnosis(
        "server_error_event", "服务器在流中途报错",
        f"流已经开始（HTTP 200），服务器随后发来了一个 error 事件：{message}",
        "问题在服务器一侧：重试；持续出现时看服务器日志。压测时它是一次失败的请求。",
    )


def proxy_failed(proxies: dict[str, str]) -> Diagnosis:
    return Diagnosis(
        "proxy_failed", "代理连接失败（local proxy failed）",
        f"请求经过了环境变量里的代理 {proxies}，但代理没有正常转发。" + PROXY_EXPLANATION,
        "确认代理程序在运行、地址端口正确；不需要代理时 unset 这些变量；"
        "访问本机时设置 NO_PROXY=127.0.0.1,localhost。",
    )


def connection_failed(url: str | None, loopback: bool, proxies: dict[str, str], refused: bool) -> Diagnosis:
    where = url or "服务器"
    title = "连接被拒绝" if refused else "连接失败"
    if proxies and loopback:
        title = "代理拦截了发往本机的请求"
        cause = (
            f"请求的是本机地址 {where}，但环境里设置了代理 {proxies}，请求被先送给了代理。"
            + PROXY_EXPLANATION
        )
    elif proxies:
        cause = f"环境里设置了代理 {proxies}：请求先发给代理，连不上的可能是代理本身。" + PROXY_EXPLANATION
    elif loopback:
        cause = f"{where} 所在的本机端口上没有服务在监听：mock 或 vLLM 没有启动，或端口写错了。"
    else:
        cause = f"连不上 {where}：网络不通、域名写错，或需要代理才能访问外网。"
    return Diagnosis(
        "connection_refused" if refused else "connection_error", title, cause,
        "本地服务先用 curl http://127.0.0.1:端口/v1/models 确认它活着；远程服务检查 Base URL 与网络；"
        "有代理变量时确认代理在运行，访问本机时设置 NO_PROXY=127.0.0.1,localhost（或用 make_client()）。",
    )


def socks_missing() -> Diagnosis:
    return Diagnosis(
        "socks_missing", "SOCKS 代理缺少依赖",
        "ALL_PROXY 或 HTTPS_PROXY 是 socks5://...，httpx 需要额外的 socksio 包。",
        "pip install 'httpx[socks]'；或者不需要代理时 unset ALL_PROXY。",
    )


def empty_stream() -> Diagnosis:
    return Diagnosis(
        "empty_stream", "流正常结束，但没有生成任何文本",
        "服务器发来了 chunk（角色、结束标记），但没有一个 chunk 带 content 或 reasoning_content："
        "max_tokens 太小（如 0）、模型立刻输出了结束符，或内容被过滤。",
        "看 finish_reason；调大 max_tokens 或换一个 prompt 再试。",
    )


def no_choices(*, streaming: bool, missing: bool) -> Diagnosis:
    shape = "没有 choices 字段" if missing else "choices 为空"
    then = ""
    if not streaming:
        then = "之后的 response.choices[0] 会抛出 TypeError: 'NoneType' object is not subscriptable。"
    return Diagnosis(
        "no_choices", f"HTTP 200，但回复里{shape}",
        "服务器返回了 200，但内容不是正常的对话补全（例如网关或非 OpenAI 兼容的端点返回的错误信息）；"
        "SDK 不会报错，" + then,
        "print(response) 看完整的回复体；先判断 if response.choices: 再取 choices[0]；"
        "用 diagnose(response) 检查。",
    )


def empty_choices_index() -> Diagnosis:
    return Diagnosis(
        "empty_choices", "IndexError：choices 是空列表",
        "流式请求开启 stream_options.include_usage 时，最后的 usage chunk 的 choices 是 []，"
        "chunk.choices[0] 就会越界；也可能是服务器返回了空的 choices。",
        "循环里先判断 if chunk.choices:；或直接用 stream_once，它会处理 usage chunk。",
    )


def sse_as_json() -> Diagnosis:
    return Diagnosis(
        "sse_as_json", "把流式响应当成 JSON 解析",
        "stream=True 时返回的是 SSE 文本（每行 `data: {...}`，最后是 `data: [DONE]`），不是一个 JSON 文档。",
        "用 SDK 迭代：for chunk in client.chat.completions.create(..., stream=True)；"
        "非流式请求才用 response.json()。",
    )


def error_body() -> Diagnosis:
    return Diagnosis(
        "error_body", "回复是一条错误信息", "回复体里是 error 字段而不是 choices：服务器拒绝了请求。",
        "读 error.message；模型名不对就核对模型 ID，Key 不对就重新复制 Key，max_tokens 过大就调小。",
    )


def truncated() -> Diagnosis:
    return Diagnosis(
        "truncated", "回答被截断（finish_reason = length）", "生成达到了 max_tokens 的上限，模型还没说完。",
        "调大 max_tokens（prompt + max_tokens 不能超过上下文长度）。",
    )


def content_filtered() -> Diagnosis:
    return Diagnosis(
        "content_filtered", "内容被过滤（finish_reason = content_filter）",
        "输出触发了服务方的内容安全策略，被中止。",
        "调整 prompt 的措辞后重试。",
    )


def no_finish_reason() -> Diagnosis:
    return Diagnosis(
        "no_finish_reason", "流结束了，但没有 finish_reason",
        "服务器没有发送结束标记，连接可能在中途被关闭。",
        "重试；测量时把这次请求当作不完整，不要计入 TPOT 统计。",
    )


def ok(finish_reason: str | None) -> Diagnosis:
    return Diagnosis(
        "ok", "没有发现问题", f"回复正常结束（finish_reason = {finish_reason}）。", "无需处理。",
    )


def unknown(type_name: str) -> Diagnosis:
    return Diagnosis(
        "unknown", f"未能识别的错误（{type_name}）",
        "diagnose 不认识这种错误，下面的原始信息是唯一可靠的线索。",
        "读完整的 traceback 和原始信息：先分清是认证、网络、参数还是模型本身的问题；"
        "把请求体和响应体打印出来对照。",
    )


# What a learner in a classroom meets when the room's server is down, restarting or cut off.
ROOM_DOWN_KINDS = frozenset({"connection_refused", "connection_error", "timeout", "unavailable",
                             "server_error",
                             "disconnected"})
ROOM_RETRY = "服务器暂时不可用，稍后重试本单元"


def for_room(found: Diagnosis) -> Diagnosis:
    """The same finding, said for a learner on the classroom server (helpers.client.backend, kind ``room``):
    the server being away is not the learner's settings; a refused key is the instructor's key, not .env."""
    if found.kind == "disconnected":
        return Diagnosis(
            found.kind, "流在中途断开：教室服务器关闭了连接",
            "回答还没结束，连接就断了：讲师的服务器重启了、网络断了一下，或者服务器把这个请求取消了。"
            "已经收到的那部分不算一次完整的测量。",
            f"{ROOM_RETRY}（不用改 .env，也不用重启内核）。",
        )
    if found.kind in ROOM_DOWN_KINDS:
        return Diagnosis(
            found.kind, "服务器暂时不可用",
            f"连不上教室服务器或它正在重启（{found.title}）。这不是你的设置的问题。",
            f"{ROOM_RETRY}：服务器回来后，在同一个内核里重新运行这个单元就行（不用改 .env，也不用重启内核）。"
            "一直连不上时请讲师看一眼服务器。",
        )
    if found.kind == "unauthorized":
        return Diagnosis(
            found.kind, "401 未授权：教室服务器不认这个 Key",
            "教室服务器给每位学员一个 Key；没有设置 INFERENCE_LAB_MOCK_KEY，或者 Key 抄错了"
            "（多了空格、少了字符），或者讲师换了一批新 Key。",
            "把纸条上的 Key 原样设为环境变量 INFERENCE_LAB_MOCK_KEY，然后重启 JupyterLab"
            "（环境变量在启动时读取）。拿不准时请讲师核对你的标签（learner-NN）。",
        )
    return found
