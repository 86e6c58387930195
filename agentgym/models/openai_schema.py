"""Pydantic models of the OpenAI chat-completions schema that ``agentgym serve`` speaks.

The request model is strict: every parameter is type-checked (no string-to-number coercion, booleans are not
integers, NaN and infinities are rejected), unknown parameters are rejected by name, and parameters of the
OpenAI API that this server does not implement (legacy functions, penalties, logit bias, response formats,
...) are rejected by name unless they carry their no-op value. ``tools``/``tool_choice``/``parallel_tool_calls``
are checked by :mod:`agentgym.models.tool_calls`. Field names and response shapes follow the OpenAI API
reference, so the official ``openai`` client parses what the server returns.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_STRICT = ConfigDict(extra="forbid", strict=True)

Finite = Annotated[float, Field(allow_inf_nan=False)]

#: OpenAI parameters this server does not implement -> the values that mean "not used" (accepted and ignored).
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "functions": ([],),
    "function_call": ("none",),
    "response_format": ({"type": "text"},),
    "logit_bias": ({},),
    "frequency_penalty": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "audio": (),
    "modalities": (["text"],),
    "prediction": (),
    "reasoning_effort": (),
    "web_search_options": (),
    "metadata": (),
    "store": (False,),
    "service_tier": ("auto", "default"),
}

MAX_STOP = 4  # as the OpenAI API
MAX_STOP_CHARS = 256


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool | None = None


class FunctionCall(BaseModel):
    model_config = _STRICT
    name: str
    arguments: str


class ToolCall(BaseModel):
    """A call the assistant made: ``arguments`` is a JSON string, as the OpenAI API sends it."""

    model_config = _STRICT
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """A chat message: ``content`` is a string or a list of text parts (joined with newlines).

    An assistant message may carry ``tool_calls`` (then ``content`` may be null); a ``tool`` message is the
    result of one call and names it in ``tool_call_id``.
    """

    model_config = _STRICT
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages may carry tool_calls")
        if (self.role == "tool") != (self.tool_call_id is not None):
            raise ValueError("a tool message needs tool_call_id (and only tool messages carry it)")
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content is required (it may be null only in an assistant message with tool_calls)")
        return self

    @field_validator("content", mode="before")
    @classmethod
    def _parts(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        texts = []
        for j, part in enumerate(value):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ValueError(f"content part {j} must be an object with a string 'type'")
            if part["type"] != "text":
                raise ValueError(f"content part {j} has type {part['type']!r}: only 'text' parts are supported")
            if set(part) != {"type", "text"} or not isinstance(part["text"], str):
                raise ValueError(f"content part {j} must be exactly {{'type': 'text', 'text': STRING}}")
            texts.append(part["text"])
        if not texts:
            raise ValueError("content must not be an empty list")
        return "\n".join(texts)


class ChatCompletionRequest(BaseModel):
    """The body of ``POST /v1/chat/completions``."""

    model_config = _STRICT
    model: str
    messages: Annotated[list[Message], Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    temperature: Annotated[Finite, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Finite, Field(gt=0, le=1)] | None = None
    n: Annotated[int, Field(ge=1, le=128)] | None = None
    stop: str | list[str] | None = None
    seed: Annotated[int, Field(ge=-(2**63), lt=2**63)] | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Checked by agentgym.models.tool_calls.plan (so each error names the field).
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: Any = None
    # Recognised but not implemented: see UNSUPPORTED (checked below, so the error names the parameter).
    functions: Any = None
    function_call: Any = None
    response_format: Any = None
    logit_bias: Any = None
    frequency_penalty: Any = None
    presence_penalty: Any = None
    audio: Any = None
    modalities: Any = None
    prediction: Any = None
    reasoning_effort: Any = None
    web_search_options: Any = None
    metadata: Any = None
    store: Any = None
    service_tier: Any = None

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any) -> Any:
        if value is None:
            return None
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
            raise ValueError("stop must be a string or a list of strings")
        if len(items) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop strings")
        if not all(0 < len(s) <= MAX_STOP_CHARS for s in items):
            raise ValueError(f"each stop string needs 1 to {MAX_STOP_CHARS} characters")
        return items

    def check(self) -> None:
        """Checks across parameters; raises :class:`ParamError` naming the parameter."""
        for name, no_op in UNSUPPORTED.items():
            value = getattr(self, name)
            if value is not None and not any(type(value) is type(v) and value == v for v in no_op):
                raise ParamError(name, f"{name} is not supported by this server (agentgym serve)")
        if self.top_logprobs and not self.logprobs:
            raise ParamError("top_logprobs", "top_logprobs needs logprobs=true")
        if self.stream_options is not None and not self.stream:
            raise ParamError("stream_options", "stream_options is only allowed with stream=true")
        if (
            self.max_tokens is not None
            and self.max_completion_tokens is not None
            and self.max_tokens != self.max_completion_tokens
        ):
            raise ParamError("max_completion_tokens", "max_tokens and max_completion_tokens disagree; send one")


class ParamError(ValueError):
    """A request parameter is invalid: becomes a 400 whose ``param`` names it."""

    def __init__(self, param: str | None, message: str, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.message = message
        self.status = status
        self.code = code


# -- responses ---------------------------------------------------------------------------------------------------
class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None
    refusal: None = None


class ResponseMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None
    tool_calls: list[ToolCall] | None = None


class Choice(BaseModel):
    index: int
    message: ResponseMessage
    logprobs: ChoiceLogprobs | None
    finish_reason: Literal["stop", "length", "tool_calls"]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None


class ToolCallDelta(ToolCall):
    index: int


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(BaseModel):
    index: int
    delta: Delta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: Literal["stop", "length", "tool_calls"] | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None


def error_body(message: str, param: str | None = None, kind: str = "invalid_request_error", code: Any = None):
    """The OpenAI error object (the client reads ``error.message``)."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
