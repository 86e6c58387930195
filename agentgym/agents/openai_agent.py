"""An OpenAI-compatible chat back-end: API models, vLLM/TGI servers, and ``agentgym serve``.

``--agent openai:MODEL --base-url URL`` builds an :class:`OpenAIAgent`. The key comes from ``api_key``
or ``$OPENAI_API_KEY`` (a placeholder is sent to local servers that do not check it). Requests of one
turn are sent concurrently (one per episode, as chat APIs take one conversation per request).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentgym.agents.llm import ChatResult, LLMAgent


class OpenAIChat:
    """Chat back-end over the ``openai`` client.

    Args:
        model: the model name the server knows.
        base_url: server URL ending in ``/v1`` (None: api.openai.com or ``$OPENAI_BASE_URL``).
        api_key: key; default ``$OPENAI_API_KEY``, else ``"EMPTY"`` (local servers).
        max_concurrency: parallel requests per turn.
        timeout: seconds per request; max_retries: client retries on connection errors and 5xx.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency of the agents
            raise ImportError("the openai agent needs the openai package: pip install openai") from exc
        self.model_name = model
        self.base_url = base_url
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)
        self.max_concurrency = max_concurrency

    def _one(self, messages: list[dict[str, str]], kwargs: dict[str, Any], stop: Sequence[str] | None) -> ChatResult:
        resp = self.client.chat.completions.create(model=self.model_name, messages=messages, **kwargs)
        choice = resp.choices[0]
        text = choice.message.content or ""
        reason = choice.finish_reason or "stop"
        # OpenAI-style servers drop the stop string from the text; put our closing tag back so the
        # parser sees a complete <action>...</action> (only when the text opened one and stopped there).
        if reason == "stop" and stop:
            for s in stop:
                opening = s.replace("</", "<", 1)
                if s.startswith("</") and text.rfind(opening) > text.rfind(s):
                    text += s
                    break
        usage = getattr(resp, "usage", None)
        return ChatResult(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason="length" if reason == "length" else "stop",
        )

    def complete(
        self,
        chats: Sequence[list[dict[str, str]]],
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[ChatResult]:
        """Send every chat (concurrently) and return the results in order."""
        kwargs: dict[str, Any] = {"max_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
        if stop:
            kwargs["stop"] = list(stop)
        if seed is not None:
            kwargs["seed"] = seed
        if len(chats) == 1:
            return [self._one(list(chats[0]), kwargs, stop)]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(chats))) as pool:
            return list(pool.map(lambda c: self._one(list(c), kwargs, stop), chats))


class OpenAIAgent(LLMAgent):
    """:class:`LLMAgent` over an OpenAI-compatible server.

    Args:
        model: model name; base_url, api_key: see :class:`OpenAIChat`; **kwargs: :class:`LLMAgent` settings.
    """

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("name", f"openai:{model}")
        super().__init__(OpenAIChat(model, base_url=base_url, api_key=api_key), **kwargs)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "base_url": self.backend.base_url}
