"""OpenAI ``tools`` for ``agentgym serve``: check the definitions, render them into the prompt, parse the calls.

Rendering: a chat template that knows tools (it renders differently when given ``tools=``: Qwen2.5/Qwen3,
Hermes, Llama 3.1, Mistral...) gets them through ``apply_chat_template(tools=...)``, and the history's assistant
``tool_calls`` and ``tool`` results as structured messages. A template that ignores tools gets the fallback
instead: a system block (appended to the first system message, or a new one) listing each tool's JSON schema
inside ``<tools></tools>`` and asking for calls as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``;
past calls are written in that form in the assistant's text and tool results become user messages wrapped in
``<tool_response></tool_response>``.

Parsing: the reply's ``<tool_call>...</tool_call>`` blocks (Qwen/Hermes format, which the fallback also asks
for; a last block left open, or with its closing tag cut short, counts when its JSON is whole). Each block must
hold a JSON object with a string ``name`` that is one of the request's tools and an ``arguments`` object; if any
block fails that, the whole reply is plain content (an unparsed call is never reported half-right). Text
outside the blocks is the message's ``content`` (None when blank). Other formats (Llama 3.1's bare JSON,
Mistral's ``[TOOL_CALLS]``) are not parsed: their replies come back as content.

``tool_choice``: ``auto`` (the default with tools) renders and parses; ``none`` renders no tools and parses
nothing; ``required`` and a named function prefill the assistant turn with the opening of a call
(``<tool_call>`` and, for a named function, its name), so the model continues inside a call. That steers
without constraining the grammar: a model that then writes broken JSON gets plain content back.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentgym.models.openai_schema import ParamError

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # the OpenAI API's rule for function names
OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)

FALLBACK_HEADER = (
    "# Tools\n\nYou can call the functions below. Each one's JSON schema is listed between <tools> and </tools>:\n"
)
FALLBACK_FOOTER = (
    "\n\nTo call a function, write a JSON object with its name and arguments between <tool_call> and "
    '</tool_call>:\n<tool_call>\n{"name": "FUNCTION_NAME", "arguments": {"ARGUMENT": "VALUE"}}\n</tool_call>'
)


@dataclass
class ToolPlan:
    """How one request uses tools: the checked definitions, the choice, and the prefilled opening of a call."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    choice: str = "auto"  # auto | none | required | function
    prefill: str = ""
    parallel: bool = True

    @property
    def parses(self) -> bool:
        return bool(self.tools) and self.choice != "none"

    @property
    def names(self) -> set[str]:
        return {t["function"]["name"] for t in self.tools}


# -- checking --------------------------------------------------------------------------------------------------
def check_tools(tools: Any) -> list[dict[str, Any]]:
    """The request's ``tools``, checked and normalised; raises :class:`ParamError` naming the bad field."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ParamError("tools", "tools must be a list of {'type': 'function', 'function': {...}} objects")
    out, seen = [], set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise ParamError(where, f"{where} must be an object {{'type': 'function', 'function': {{...}}}}")
        if set(tool) - {"type", "function"}:
            raise ParamError(where, f"{where} has unknown keys {sorted(set(tool) - {'type', 'function'})}")
        fn = tool["function"]
        unknown = set(fn) - {"name", "description", "parameters", "strict"}
        if unknown:
            raise ParamError(f"{where}.function", f"{where}.function has unknown keys {sorted(unknown)}")
        name = fn.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ParamError(
                f"{where}.function.name", f"{where}.function.name must be 1-64 letters, digits, '_' or '-'"
            )
        if name in seen:
            raise ParamError(f"{where}.function.name", f"{where}.function.name {name!r} is defined twice")
        seen.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            raise ParamError(f"{where}.function.description", f"{where}.function.description must be a string")
        if "strict" in fn and not isinstance(fn["strict"], bool | None):
            raise ParamError(f"{where}.function.strict", f"{where}.function.strict must be a boolean")
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type", "object") != "object"):
            raise ParamError(
                f"{where}.function.parameters",
                f"{where}.function.parameters must be a JSON schema object with type 'object'",
            )
        clean = {"name": name}
        if fn.get("description") is not None:
            clean["description"] = fn["description"]
        clean["parameters"] = params if params is not None else {"type": "object", "properties": {}}
        out.append({"type": "function", "function": clean})
    return out


def plan(tools: Any, tool_choice: Any, parallel_tool_calls: Any) -> ToolPlan:
    """The :class:`ToolPlan` of a request; raises :class:`ParamError` for bad ``tools``/``tool_choice``."""
    checked = check_tools(tools)
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        raise ParamError("parallel_tool_calls", "parallel_tool_calls must be a boolean")
    parallel = parallel_tool_calls is not False
    if tool_choice is None:
        return ToolPlan(checked, "auto" if checked else "none", parallel=parallel)
    if tool_choice == "none":
        return ToolPlan(checked, "none", parallel=parallel)
    if not checked:
        raise ParamError("tool_choice", "tool_choice is only allowed when tools are given")
    if tool_choice == "auto":
        return ToolPlan(checked, "auto", parallel=parallel)
    if tool_choice == "required":
        return ToolPlan(checked, "required", prefill=OPEN + "\n", parallel=parallel)
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if name not in {t["function"]["name"] for t in checked}:
            raise ParamError("tool_choice", f"tool_choice names the function {name!r}, which is not in tools")
        opening = OPEN + "\n" + json.dumps({"name": name}, ensure_ascii=False)[:-1] + ', "arguments": '
        return ToolPlan(checked, "function", prefill=opening, parallel=parallel)
    raise ParamError(
        "tool_choice",
        "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': NAME}}",
    )


# -- rendering -------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _template_takes_tools(template: str, tokenizer: Any) -> bool:
    probe = [{"role": "user", "content": "hi"}]
    tool = {"type": "function", "function": {"name": "probe_fn", "parameters": {"type": "object", "properties": {}}}}
    try:
        plain = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True)
        with_tools = tokenizer.apply_chat_template(probe, tools=[tool], tokenize=False, add_generation_prompt=True)
    except Exception:  # a template that fails on tools does not support them
        return False
    return plain != with_tools


def template_takes_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template renders ``tools`` (else the fallback system block is used)."""
    template = getattr(tokenizer, "chat_template", None)
    return isinstance(template, str) and _template_takes_tools(template, tokenizer)


def _arguments(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _call_text(name: str, arguments: Any) -> str:
    return OPEN + "\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n" + CLOSE


def chat_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]], native: bool) -> list[dict[str, Any]]:
    """The request's messages as the template gets them (``native``: structured calls; else the fallback form).

    Args:
        messages: dicts with ``role``, ``content`` (str or None), ``tool_calls`` and ``tool_call_id`` as sent.
        tools: the tools rendered into the prompt (the fallback puts them in a system block).
        native: the template renders tools itself.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        role = "system" if m["role"] == "developer" else m["role"]
        calls = m.get("tool_calls") or []
        if native:
            msg: dict[str, Any] = {"role": role, "content": m.get("content") or ""}
            if calls:
                msg["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["function"]["name"], "arguments": _arguments(c["function"]["arguments"])}}
                    for c in calls
                ]  # fmt: skip
            if role == "tool":
                msg["tool_call_id"] = m.get("tool_call_id")
            out.append(msg)
        elif role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"})
        else:
            parts = [m.get("content") or ""] + [
                _call_text(c["function"]["name"], _arguments(c["function"]["arguments"])) for c in calls
            ]
            out.append({"role": role, "content": "\n".join(p for p in parts if p)})
    if tools and not native:
        block = FALLBACK_HEADER + "<tools>\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        block += "\n</tools>" + FALLBACK_FOOTER
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": (out[0]["content"] + "\n\n" + block).lstrip()}
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def render(tokenizer: Any, messages: list[dict[str, Any]], tool_plan: ToolPlan) -> str:
    """The prompt text: messages (with tools when they are used) through the chat template, plus the prefill."""
    tools = tool_plan.tools if tool_plan.choice != "none" else []
    native = template_takes_tools(tokenizer)
    chat = chat_messages(messages, tools, native)
    if not getattr(tokenizer, "chat_template", None):
        text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant: "
    elif native and tools:
        text = tokenizer.apply_chat_template(chat, tools=tools, tokenize=False, add_generation_prompt=True)
    else:
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    return text + tool_plan.prefill


# -- parsing ---------------------------------------------------------------------------------------------------
def _one_call(body: str, names: set[str]) -> dict[str, Any] | None:
    try:
        obj = json.loads(body.strip())
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or obj["name"] not in names:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models write the arguments as a JSON string, as the API returns them
        args = _arguments(args)
    if not isinstance(args, dict):
        return None
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)},
    }


def parse_tool_calls(text: str, names: set[str], parallel: bool = True) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a reply into ``(content, tool_calls)``; ``tool_calls`` is empty when the reply holds no valid call.

    Args:
        text: the model's reply (with any prefill in front).
        names: the tools the request offered (a call to another name makes the reply plain content).
        parallel: False keeps only the first call (``parallel_tool_calls=false``).
    """
    bodies, outside, pos = [], [], 0
    for m in _BLOCK.finditer(text):
        outside.append(text[pos : m.start()])
        bodies.append(m.group(1))
        pos = m.end()
    rest = text[pos:]
    if OPEN in rest:  # a last call left open (the reply ended right after its JSON)
        cut = rest.index(OPEN)
        outside.append(rest[:cut])
        body = rest[cut + len(OPEN) :]
        for k in range(len(CLOSE) - 1, 0, -1):  # a closing tag cut short by max_tokens
            if body.endswith(CLOSE[:k]):
                body = body[:-k]
                break
        bodies.append(body)
    else:
        outside.append(rest)
    if not bodies:
        return text, []
    calls = [_one_call(b, names) for b in bodies]
    if any(c is None for c in calls):
        return text, []
    content = "".join(outside).strip()
    return (content or None), (calls if parallel else calls[:1])
