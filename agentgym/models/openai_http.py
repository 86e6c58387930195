"""The HTTP layer of ``agentgym serve``: FastAPI routes, OpenAI-format errors, server-sent events, a body cap.

Imported only when serving (it needs the ``serve`` extra); :mod:`agentgym.models.serve` holds the model side
and the command line.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentgym.models.chat_server import ChatServer, TextAssembler
from agentgym.models.openai_schema import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChoiceLogprobs,
    ChunkChoice,
    Delta,
    ParamError,
    ResponseMessage,
    TokenLogprob,
    ToolCall,
    ToolCallDelta,
    Usage,
    error_body,
)
from agentgym.models.serving_engine import DoneEvent, ErrorEvent, FinishEvent, GenRequest, TokenEvent
from agentgym.models.tool_calls import ToolPlan, parse_tool_calls


def _param_of(loc: tuple) -> str | None:
    parts = [p for p in loc if p != "body"]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and p.isidentifier():
            out += ("." if out else "") + p
        else:
            break  # a union member tag, e.g. 'list[str]'
    return out or None


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets a 413, whether or not it declares its length."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                if not value.isdigit() or len(value) > 18:
                    return await _send_json(send, 400, error_body("invalid Content-Length header"))
                if int(value) > self.limit:
                    return await _send_json(send, 413, self._too_large())
        seen = 0

        async def receive_limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, self._too_large()["error"]["message"])
            return message

        return await self.app(scope, receive_limited, send)

    def _too_large(self) -> dict:
        return error_body(f"request body over {self.limit} bytes (the server's --max-body-bytes)")


async def _send_json(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def build_app(server: ChatServer) -> FastAPI:
    """The FastAPI app serving ``server``."""
    app = FastAPI(title="agentgym serve", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if not errors:
            return JSONResponse(error_body("invalid request"), status_code=400)
        first = errors[0]
        param = _param_of(tuple(first.get("loc", ())))
        kind = first.get("type")
        if kind == "extra_forbidden":
            message = f"unrecognized request argument supplied: {param}"
        elif kind in ("json_invalid", "missing") and param is None:
            message = "the body must be a JSON object of the chat completions schema"
        else:
            text = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
            message = f"{param}: {text}" if param else text
        return JSONResponse(error_body(message, param), status_code=400)

    @app.exception_handler(StarletteHTTPException)  # also the router's own 404/405
    async def _http(request: Request, exc: StarletteHTTPException):
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return JSONResponse(error_body(str(exc.detail), kind=kind), status_code=exc.status_code)

    @app.exception_handler(ParamError)
    async def _param(request: Request, exc: ParamError):
        code = "model_not_found" if exc.status == 404 else exc.code
        return JSONResponse(error_body(exc.message, exc.param, code=code), status_code=exc.status)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    card = {
        "id": server.name,
        "object": "model",
        "created": 0,
        "owned_by": "agentgym",
        "max_model_len": server.context,
    }

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [card]}

    @app.get("/v1/models/{model:path}")
    async def model(model: str):
        if model != server.name:
            raise ParamError("model", f"the model {model!r} does not exist: this server serves {server.name!r}", 404)
        return card

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest, request: Request):
        # Tokenizing a long prompt takes a while: off the event loop, so other clients are not held up.
        gen, tool_plan = await asyncio.to_thread(server.prepare, body)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def on_event(event: Any) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, event)
            except RuntimeError:  # the loop is gone (server shutting down): nobody to tell
                gen.cancelled.set()

        gen.on_event = on_event
        server.engine.submit(gen)
        meta = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()), "model": server.name}
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(
                _stream(server, gen, tool_plan, events, meta, include_usage, request),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            return await _complete(server, gen, tool_plan, events, meta, request)
        finally:
            gen.cancelled.set()  # finished, failed or abandoned: the engine drops any rows left

    return app


async def _next_event(events: asyncio.Queue, request: Any) -> Any:
    """The next engine event; None when the client has gone away."""
    while True:
        try:
            return await asyncio.wait_for(events.get(), timeout=1.0)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                return None


def _reply(text: str, tool_plan: ToolPlan) -> tuple[str | None, list[ToolCall]]:
    """A choice's content and tool calls (none unless the request's tools are in use)."""
    if not tool_plan.parses:
        return text, []
    content, calls = parse_tool_calls(tool_plan.prefill + text, tool_plan.names, tool_plan.parallel)
    return content, [ToolCall.model_validate(c) for c in calls]


async def _complete(
    server: ChatServer, gen: GenRequest, tool_plan: ToolPlan, events: asyncio.Queue, meta: dict, request: Any
):
    texts = [TextAssembler(server.tokenizer, gen.stop) for _ in range(gen.n)]
    lps: list[list[TokenLogprob]] = [[] for _ in range(gen.n)]
    reasons = ["length"] * gen.n
    used = [0] * gen.n
    while True:
        ev = await _next_event(events, request)
        if ev is None:
            return JSONResponse(error_body("client closed the request"), status_code=499)
        if isinstance(ev, TokenEvent):
            texts[ev.index].add(ev.token, incremental=False)
            if gen.logprobs:
                lps[ev.index].append(server.logprob_entry(ev))
        elif isinstance(ev, FinishEvent):
            reasons[ev.index], used[ev.index] = ev.reason, ev.tokens
        elif isinstance(ev, ErrorEvent):
            return JSONResponse(error_body(f"generation failed: {ev.message}", kind="server_error"), status_code=500)
        elif isinstance(ev, DoneEvent):
            break
    choices = []
    for i, t in enumerate(texts):
        content, calls = _reply(t.finish(), tool_plan)
        reason = "tool_calls" if calls else "stop" if t.stopped else reasons[i]
        logprobs = ChoiceLogprobs(content=lps[i]) if gen.logprobs else None
        message = ResponseMessage(content=content, tool_calls=calls or None)
        choices.append(Choice(index=i, message=message, logprobs=logprobs, finish_reason=reason))
    usage = Usage(prompt_tokens=len(gen.prompt), completion_tokens=sum(used), total_tokens=len(gen.prompt) + sum(used))
    return ChatCompletion(choices=choices, usage=usage, **meta)


def _sse(chunk: ChatCompletionChunk, include_usage: bool) -> str:
    data = chunk.model_dump(mode="json", exclude={"usage"} if not include_usage else None)
    for choice in data["choices"]:  # as the OpenAI API: a delta holds only what it carries
        choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _stream(
    server: ChatServer,
    gen: GenRequest,
    tool_plan: ToolPlan,
    events: asyncio.Queue,
    meta: dict,
    include_usage: bool,
    request: Any,
) -> AsyncIterator[str]:
    """Server-sent events in the OpenAI format: a role chunk per choice, content deltas (with their logprobs),
    a finish chunk per choice, the usage chunk when asked for, then ``data: [DONE]``.

    With tools in use a choice's text is held until it ends (a call is known only once its JSON is whole):
    then one delta carries either its content or its tool calls."""
    held = tool_plan.parses
    texts = [TextAssembler(server.tokenizer, gen.stop) for _ in range(gen.n)]
    pending: list[list[TokenLogprob]] = [[] for _ in range(gen.n)]
    used = 0

    def chunk(index: int, delta: Delta, logprobs=None, finish=None) -> str:
        c = ChatCompletionChunk(
            choices=[ChunkChoice(index=index, delta=delta, logprobs=logprobs, finish_reason=finish)], **meta
        )
        return _sse(c, include_usage)

    try:
        for i in range(gen.n):
            yield chunk(i, Delta(role="assistant", content=""))
        while True:
            ev = await _next_event(events, request)
            if ev is None:
                return
            if isinstance(ev, TokenEvent):
                delta = texts[ev.index].add(ev.token, incremental=not held)
                if gen.logprobs:
                    pending[ev.index].append(server.logprob_entry(ev))
                if delta:
                    lp = ChoiceLogprobs(content=pending[ev.index]) if gen.logprobs else None
                    pending[ev.index] = []
                    yield chunk(ev.index, Delta(content=delta), lp)
            elif isinstance(ev, FinishEvent):
                t = texts[ev.index]
                rest = t.finish()
                used += ev.tokens
                calls: list[ToolCall] = []
                delta = Delta(content=rest)
                if held:
                    content, calls = _reply(rest, tool_plan)
                    delta = Delta(
                        content=content,
                        tool_calls=[ToolCallDelta(index=k, **c.model_dump()) for k, c in enumerate(calls)] or None,
                    )
                if delta.content or delta.tool_calls or pending[ev.index]:
                    lp = ChoiceLogprobs(content=pending[ev.index]) if gen.logprobs else None
                    pending[ev.index] = []
                    yield chunk(ev.index, delta, lp)
                finish = "tool_calls" if calls else "stop" if t.stopped else ev.reason
                yield chunk(ev.index, Delta(), finish=finish)
            elif isinstance(ev, ErrorEvent):
                err = {"error": {"message": f"generation failed: {ev.message}", "type": "server_error"}}
                yield f"data: {json.dumps(err)}\n\n"
                return
            elif isinstance(ev, DoneEvent):
                break
        if include_usage:
            usage = Usage(prompt_tokens=len(gen.prompt), completion_tokens=used, total_tokens=len(gen.prompt) + used)
            yield f"data: {ChatCompletionChunk(choices=[], usage=usage, **meta).model_dump_json()}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        gen.cancelled.set()  # also when the client went away mid-stream
