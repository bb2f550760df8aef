"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1, for tests.

openai 3.x sends its requests through httpx2, which respx cannot intercept, so the tests point the real
SDK at a real HTTP server instead (base_url = stub.base_url). Each request to POST /v1/chat/completions
(or /chat/completions) takes the next step of the script:

- `Reply(...)`: a canned assistant message — tool calls (id, name, arguments string) and/or content;
- a callable `(ChatRequest) -> step`: builds the answer from what the client sent, so a scripted "model"
  can read the tool results it was given and answer accordingly;
- `Delay(seconds, then)`: wait before answering (past the client's timeout, to trigger it);
- `HttpError(status, message)`: an OpenAI-style error body with that status.

GET /v1/models lists the one model it plays, `stub-model` (what `billsleuth doctor` checks).

Every request is recorded (body, headers, and the client's address, so tests can tell connections apart)
so tests can assert on the messages and the tools offered. When the script runs out the stub answers
HTTP 400, which the client does not retry.

Every completion reports `usage` (prompt, completion and cached prompt tokens) and an id unique to this
stub (`chatcmpl-<stub>-0001`, …): by default the tokens are estimated from the text, `usage=Usage(…)` fixes
them for every reply and `Reply(usage=…)` for one; `Reply(response_id=…)` answers with a given id (a
provider or proxy replaying a response), `Reply(no_usage=True)` with no usage at all.

`unknown_fields` plays an endpoint that does not know some request fields: a request carrying one gets
that field's error (see `unknown_field_errors` for what real servers answer) without taking a script step.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

from aiohttp import web

API_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")  # what `billsleuth doctor` asks


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # exactly what the model "wrote": may be invalid JSON on purpose
    id: str | None = None


@dataclass(frozen=True)
class Usage:
    """What a completion says it used: prompt tokens (cached ones among them) and completion tokens."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None  # reported as usage.prompt_tokens_details.cached_tokens

    def as_json(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens, "audio_tokens": 0}
        return usage


@dataclass(frozen=True)
class Reply:
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    usage: Usage | None = None  # default: the stub's, else estimated from the text
    response_id: str | None = None  # default: the stub's next id
    no_usage: bool = False  # answer without any usage (some servers do)


@dataclass(frozen=True)
class Delay:
    seconds: float
    then: Step | None = None  # what to answer once the delay is over (nobody may be listening)


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str = "The server had an error while processing your request."
    type: str = "server_error"
    code: str | None = None
    param: str | None = None  # the request field at fault, when the server says


Step = Union[Reply, Delay, HttpError, Callable[["ChatRequest"], "Step"]]  # noqa: UP007 (forward refs)


def unknown_field_errors(field: str) -> dict[str, HttpError]:
    """How real OpenAI-compatible servers refuse a request field they do not know, by server."""
    return {
        # Azure OpenAI before API version 2024-09-01-preview
        "azure": HttpError(400, f"Unrecognized request argument supplied: {field}", "invalid_request_error"),
        # vLLM (and other servers validating the body with pydantic, extra="forbid")
        "vllm": HttpError(
            400,
            f"[{{'type': 'extra_forbidden', 'loc': ('body', '{field}'), 'msg': 'Extra inputs are not "
            "permitted', 'input': 400}]",
            "BadRequestError",
        ),
        # Mistral's API, with HTTP 422
        "mistral": HttpError(
            422,
            f"{{'detail': [{{'type': 'extra_forbidden', 'loc': ['body', '{field}'], 'msg': 'Extra inputs "
            "are not permitted', 'input': 400}]}",
            "invalid_request_error",
        ),
    }


def call(name: str, /, **arguments: Any) -> Reply:
    """An assistant turn calling one tool with these (JSON-encoded) arguments."""
    return Reply(tool_calls=(ToolCall(name, json.dumps(arguments)),))


def raw_call(name: str, arguments: str) -> Reply:
    """An assistant turn calling one tool with arguments given verbatim (e.g. broken JSON)."""
    return Reply(tool_calls=(ToolCall(name, arguments),))


def say(text: str) -> Reply:
    """An assistant turn with text and no tool call."""
    return Reply(content=text)


@dataclass
class ChatRequest:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    peer: tuple[str, int] | None = None  # the client's address and port: one per connection

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def tool_names(self) -> list[str]:
        return [spec["function"]["name"] for spec in self.body.get("tools", [])]

    def contents(self, role: str) -> list[str]:
        return [m.get("content") or "" for m in self.messages if m.get("role") == role]

    def tool_results(self, tool: str) -> list[Any]:
        """The parsed content of every tool message answering a call to `tool`, oldest first."""
        names = {
            c["id"]: c["function"]["name"]
            for m in self.messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        }
        return [
            json.loads(m["content"])
            for m in self.messages
            if m.get("role") == "tool" and names.get(m.get("tool_call_id")) == tool
        ]

    def last_tool_messages(self) -> list[dict[str, Any]]:
        """The tool messages after the last assistant turn (what the client just answered)."""
        trailing: list[dict[str, Any]] = []
        for message in reversed(self.messages):
            if message.get("role") != "tool":
                break
            trailing.append(message)
        return list(reversed(trailing))


@dataclass
class OpenAIStub:
    script: Iterable[Step]
    api_key: str = "test"
    requests: list[ChatRequest] = field(default_factory=list)
    unknown_fields: dict[str, HttpError] = field(default_factory=dict)  # field → how it is refused
    usage: Usage | None = None  # every reply's usage, unless the reply says otherwise

    def __post_init__(self) -> None:
        self._steps: deque[Step] = deque(self.script)
        self._ids = itertools.count(1)
        self._id_prefix = f"chatcmpl-{secrets.token_hex(4)}"  # two stubs never answer with one id
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        return len(self._steps)

    @property
    def connections(self) -> set[tuple[str, int]]:
        """The client connections the requests came on."""
        return {r.peer for r in self.requests if r.peer is not None}

    async def start(self) -> OpenAIStub:
        app = web.Application()
        for path in API_PATHS:
            app.router.add_post(path, self._handle)
        for path in MODELS_PATHS:
            app.router.add_get(path, self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)  # port 0: the OS picks a free one
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def close(self) -> None:
        self._closing.set()  # wake any Delay still sleeping for a client that gave up
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> OpenAIStub:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- serving ----

    async def _handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(
                HttpError(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
            )
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(
                HttpError(400, "We could not parse the JSON body of your request.", "invalid_request_error")
            )
        peer = request.transport.get_extra_info("peername") if request.transport else None
        chat = ChatRequest(request.path, dict(request.headers), body, tuple(peer[:2]) if peer else None)
        self.requests.append(chat)
        refused = next((error for name, error in self.unknown_fields.items() if name in body), None)
        if refused is not None:
            return _error(refused)
        if not self._steps:
            return _error(
                HttpError(
                    400,
                    f"the stub's script is exhausted (request {len(self.requests)})",
                    "invalid_request_error",
                )
            )
        step: Step | None = self._steps.popleft()
        while step is not None and not isinstance(step, Reply | HttpError):
            if isinstance(step, Delay):
                await self._sleep(step.seconds)
                step = step.then
            else:
                step = step(chat)
        if step is None:
            return _error(HttpError(500, "the stub's delay step had nothing to answer"))
        if isinstance(step, HttpError):
            return _error(step)
        return web.json_response(self._completion(step, body))

    async def _models(self, request: web.Request) -> web.Response:
        """The one model the stub plays (GET /models), for `billsleuth doctor`."""
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(
                HttpError(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
            )
        model = {"id": "stub-model", "object": "model", "created": 0, "owned_by": "stub"}
        return web.json_response({"object": "list", "data": [model]})

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), seconds)

    def _completion(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        number = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{number}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(reply.tool_calls, start=1)
            ]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        usage = (
            reply.usage
            or self.usage
            or Usage(len(json.dumps(body.get("messages", []))) // 4, len(json.dumps(message)) // 4)
        )
        completion = {
            "id": reply.response_id or f"{self._id_prefix}-{number:04d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub-model"),
            "system_fingerprint": "fp_stub",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        }
        if not reply.no_usage:
            completion["usage"] = usage.as_json()
        return completion


def _error(error: HttpError) -> web.Response:
    body = {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}
    return web.json_response(body, status=error.status)
