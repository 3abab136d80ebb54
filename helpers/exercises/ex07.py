"""练习 for notebook 07 (troubleshooting): fix a base URL, read a status code, a finish_reason, a refused
connection.

The base URL is judged by ``helpers.client.urls.normalize_base_url``; the advice matches
``helpers.client.diagnose`` (notebook 07 §1, §2, §6, §8).
"""
from __future__ import annotations

from helpers.client.urls import normalize_base_url
from helpers.exercises.check import ChoiceExercise, Mistake, NumberExercise

PASTED_URL = "https://taotoken.net/api/v1/chat/completions/"


def _url(text: str) -> str:
    return text.strip().strip("'\"`").strip().rstrip("/")


check_base_url = ChoiceExercise(
    id="07.1", name="check_base_url",
    prompt=(f"**练习 07.1 · 修好 Base URL**\n\n一位同学把 `{PASTED_URL}` 填进了 `TAOTOKEN_BASE_URL`，"
            "请求返回 404。传给 `OpenAI(base_url=...)` 的正确值是什么？（字符串）"),
    expected=lambda: normalize_base_url(PASTED_URL).url, normalise=_url,
    mistakes=lambda url: [
        Mistake("unchanged", PASTED_URL, "这就是原来的值：SDK 会在 base_url 后面再拼 `/chat/completions`。"),
        Mistake("v1_dropped", url.removesuffix("/v1"), "去掉得太多了：openai SDK 不会自动补 `/v1`，它必"
                                                       "须在 base_url 里。"),
        Mistake("endpoint_kept", url + "/chat", "还留着接口路径的一部分；base_url 到 `/v1` 为止。"),
    ],
    hint="openai SDK 只把 `chat/completions` 拼到 base_url 后面，别的什么也不加。",
)

check_wrong_key_status = NumberExercise(
    id="07.2", name="check_wrong_key_status", integer=True,
    prompt="**练习 07.2 · Key 错了**\n\nAPI Key 填错（或者多了空格）时，服务器返回哪个 HTTP 状态码？（整数）",
    expected=lambda: 401,
    mistakes=lambda code: [
        Mistake("forbidden", 403, "403 是“身份对了但没有权限”；Key 本身不对是 401 Unauthorized。"),
        Mistake("not_found", 404, "404 是路径或模型不存在（练习 07.1 那种）；Key 不对是另一个码。"),
        Mistake("rate_limited", 429, "429 是限流或额度用完。"),
    ],
    hint="每个 4xx 状态码说的是不同的问题：看第 1 节（未授权）和第 9 节的表。",
)

check_finish_reason = ChoiceExercise(
    id="07.3", name="check_finish_reason",
    prompt="**练习 07.3 · 回答只有一半**\n\n流正常结束，最后一个 chunk 的 `finish_reason` 是 `'length'`"
           "。原因是：",
    options={"A": "内容被安全策略过滤", "B": "达到了 max_tokens（或上下文长度）", "C": "服务器中途断开了连接",
             "D": "模型不存在"},
    correct="B",
    wrong={"A": "被过滤时 finish_reason 是 'content_filter'。",
           "C": "连接断开时流不会正常结束，也收不到 finish_reason（SDK 会报错）。",
           "D": "模型不存在时根本没有流：请求直接返回 404。"},
    hint="finish_reason 说的是“为什么停下”：'stop' 是模型自己说完了。",
)

check_connection_refused = ChoiceExercise(
    id="07.4", name="check_connection_refused",
    prompt=("**练习 07.4 · 连接被拒绝**\n\n`base_url` 是 `http://127.0.0.1:8000/v1`，请求报 "
            "`APIConnectionError: Connection error.`（底层是 connection refused）。第一步该查什么？"),
    options={"A": "API Key 对不对", "B": "本机 8000 端口上有没有服务在运行", "C": "模型名对不对",
             "D": "max_tokens 是不是太大"},
    correct="B",
    wrong={"A": "Key 不对时服务器会回 401；connection refused 说明根本没有服务器应答。",
           "C": "模型名不对时服务器会回 404；这里连服务器都没连上。",
           "D": "max_tokens 太大时服务器会回 400；这里连服务器都没连上。"},
    hint="connection refused 发生在 HTTP 之前：请求到达服务器了吗？",
)

EXERCISES = (check_base_url, check_wrong_key_status, check_finish_reason, check_connection_refused)
