"""An OpenAI-compatible chat back-end: API models, vLLM/TGI servers, and ``agentgym serve``.

``--agent openai:MODEL --base-url URL`` builds an :class:`OpenAIAgent`. The key comes from ``api_key``
or ``$OPENAI_API_KEY`` (a placeholder is sent to local servers that do not check it). Requests of one
turn are sent concurrently (one per episode, as chat APIs take one conversation per request).

A flaky server does not end a long eval: transient failures (connection refused or reset, timeouts, HTTP 408,
409, 429 and 5xx) are retried with exponential backoff and full jitter, waiting what ``Retry-After`` asks when
the server says; after ``max_retries`` retries :class:`ModelServerError` says so in one line, and rerunning the
command resumes from the episode log.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentgym.agents.llm import ChatResult, LLMAgent


class ModelServerError(RuntimeError):
    """The model server kept failing after every retry; the message says what to do (one line in the CLI)."""

    user_error = True


#: HTTP statuses worth retrying: timeout, conflict, rate limit and server errors.
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def retry_after_s(headers: Any) -> float | None:
    """Seconds the server asks to wait (``Retry-After``: seconds or an HTTP date; ``retry-after-ms``), else None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    try:
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return None if when is None else max(0.0, when.timestamp() - time.time())


class OpenAIChat:
    """Chat back-end over the ``openai`` client.

    Args:
        model: the model name the server knows.
        base_url: server URL ending in ``/v1`` (None: api.openai.com or ``$OPENAI_BASE_URL``).
        api_key: key; default ``$OPENAI_API_KEY``, else ``"EMPTY"`` (local servers).
        max_concurrency: parallel requests per turn.
        timeout: seconds per request.
        max_retries: retries of one request on a transient failure before :class:`ModelServerError`.
        backoff_s: the first retry's wait bound; it doubles per retry up to ``max_backoff_s`` (full jitter:
            the wait is drawn uniformly below the bound, so many clients do not retry in step).
        max_backoff_s: the longest wait, also the cap on a server's ``Retry-After``.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_concurrency: int = 16,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency of the agents
            raise ImportError("the openai agent needs the openai package: pip install openai") from exc
        self.model_name = model
        self.base_url = base_url
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        # retries are ours (below): one policy for every failure, and a message that names the server at the end
        self.client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)
        self.max_concurrency = max_concurrency
        self.max_retries, self.backoff_s, self.max_backoff_s = int(max_retries), float(backoff_s), float(max_backoff_s)
        self.retries = 0  # transient failures retried so far (all requests)
        self._jitter = random.Random()  # private: retries must not move the global RNG of a seeded run
        self._sleep = time.sleep

    def _create(self, messages: list[dict[str, str]], kwargs: dict[str, Any]) -> Any:
        """One chat request, retried on transient failures (see the module docstring)."""
        import openai

        for attempt in range(self.max_retries + 1):
            try:
                return self.client.chat.completions.create(model=self.model_name, messages=messages, **kwargs)
            except (openai.APIConnectionError, openai.APIStatusError) as exc:  # timeouts are connection errors
                status = getattr(exc, "status_code", None)
                if status is not None and status not in RETRY_STATUSES:
                    raise  # a request the server refuses (400, 401, 404, ...): retrying cannot help
                what = f"HTTP {status}" if status is not None else type(exc).__name__
                if attempt == self.max_retries:
                    url = self.base_url or os.environ.get("OPENAI_BASE_URL") or "the default OpenAI URL"
                    resume = "then rerun the same command: finished episodes are kept in the log and resumed"
                    if status is None:
                        raise ModelServerError(
                            f"cannot reach the model server at {url} ({what}, {attempt + 1} tries): start one "
                            f"(`agentgym serve --model PATH`) or fix --base-url, {resume}"
                        ) from exc
                    raise ModelServerError(
                        f"the model server at {url} failed {attempt + 1} times in a row (last: {what}: "
                        f"{str(exc).splitlines()[0][:200]}); check that it is up and not overloaded, {resume}"
                    ) from exc
                bound = min(self.max_backoff_s, self.backoff_s * 2**attempt)
                wait = self._jitter.uniform(0, bound)
                asked = retry_after_s(getattr(getattr(exc, "response", None), "headers", None))
                if asked is not None:
                    wait = min(self.max_backoff_s, asked)
                self.retries += 1
                self._sleep(wait)
        raise AssertionError("unreachable")

    def _one(self, messages: list[dict[str, str]], kwargs: dict[str, Any], stop: Sequence[str] | None) -> ChatResult:
        resp = self._create(messages, kwargs)
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
