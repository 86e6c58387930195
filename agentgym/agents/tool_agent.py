"""An agent that acts through OpenAI tool calls: ``agentgym eval --agent openai:MODEL --tool-calls``.

The request carries the env family's tools (:func:`agentgym.prompts.tools.openai_tools`) and the episode as a
tool-calling conversation: the instruction, the first observation, then for each past turn the assistant's tool
call and the env's observation as the tool's result. The model's first tool call becomes the env's text action
(:func:`~agentgym.prompts.tools.to_action`, one-to-one); a reply without a usable tool call is played as its text
and marked ``format_valid=False`` (the env judges it, as any malformed action).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentgym.agent_io import AgentAction, AgentInput
from agentgym.prompts.tools import ToolCallError, family, openai_tools, to_action, to_tool_call


class OpenAIToolAgent:
    """Plays any env with a tool form through an OpenAI-compatible chat server's tool calls.

    Args:
        model: the model name the server knows.
        base_url: server URL ending in ``/v1`` (None: ``$OPENAI_BASE_URL`` or OpenAI's).
        api_key: default ``$OPENAI_API_KEY``, else ``"EMPTY"`` (local servers).
        temperature: sampling temperature; max_new_tokens: reply length cap.
        history_length: past turns sent (-1: all).
        seed: sent with each request (servers that honour it sample reproducibly).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        max_new_tokens: int | None = None,
        history_length: int | None = None,
        seed: int | None = None,
        **_: Any,
    ) -> None:
        import openai

        self.name = f"openai-tools:{model}"
        self.model = model
        self.base_url = base_url
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.client = openai.OpenAI(base_url=base_url, api_key=key, timeout=120.0, max_retries=2)
        self.temperature = 0.4 if temperature is None else temperature
        self.max_new_tokens = 512 if max_new_tokens is None else max_new_tokens
        self.history_length = -1 if history_length is None else history_length
        self.seed = seed

    def config(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_url": self.base_url,
            "tool_calls": True,
            "temperature": self.temperature,
            "max_new_tokens": self.max_new_tokens,
            "history_length": self.history_length,
        }

    def messages(self, inp: AgentInput) -> list[dict[str, Any]]:
        """The episode so far as a tool-calling chat."""
        fam = family(inp.env_id)
        history = list(inp.history)
        if self.history_length >= 0:
            history = history[len(history) - self.history_length :] if self.history_length else []
        current = inp.observation
        if fam.show_admissible and inp.info.get("admissible_actions"):
            current += "\nAdmissible commands: " + ", ".join(inp.info["admissible_actions"])
        observations = [obs for obs, _ in history] + [current]
        chat: list[dict[str, Any]] = [
            {"role": "system", "content": fam.instruction},
            {"role": "user", "content": observations[0]},
        ]
        for i, (_, action) in enumerate(history):
            try:
                name, args = to_tool_call(fam, action)
            except ToolCallError:  # a past reply that was no tool call: replay it as text
                chat += [{"role": "assistant", "content": action}, {"role": "user", "content": observations[i + 1]}]
                continue
            call_id = f"call_{i}"
            chat.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                    ],
                }
            )
            chat.append({"role": "tool", "tool_call_id": call_id, "content": observations[i + 1]})
        return chat

    def _one(self, inp: AgentInput) -> AgentAction:
        kwargs: dict[str, Any] = {"max_tokens": self.max_new_tokens, "temperature": self.temperature}
        if self.seed is not None:
            kwargs["seed"] = self.seed + inp.episode_index
        resp = self.client.chat.completions.create(
            model=self.model, messages=self.messages(inp), tools=openai_tools(inp.env_id), **kwargs
        )
        msg = resp.choices[0].message
        usage = getattr(resp, "usage", None)
        tokens = {
            "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
        }
        for call in msg.tool_calls or []:
            fn = call.function
            output = json.dumps({"name": fn.name, "arguments": fn.arguments})
            try:
                return AgentAction(action=to_action(inp.env_id, fn.name, fn.arguments), output=output, **tokens)
            except ToolCallError as exc:
                return AgentAction(action="", output=output, format_valid=False, extras={"error": str(exc)}, **tokens)
        text = msg.content or ""
        return AgentAction(action=text.strip(), output=text, format_valid=False, **tokens)

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        if len(inputs) == 1:
            return [self._one(inputs[0])]
        with ThreadPoolExecutor(max_workers=min(16, len(inputs))) as pool:
            return list(pool.map(self._one, inputs))
