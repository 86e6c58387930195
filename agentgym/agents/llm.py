"""LLM agents: a chat back-end (transformers or an OpenAI-compatible API) + a prompt template + the parser.

:class:`LLMAgent` builds each live episode's prompt with the env's :class:`~agentgym.prompts.PromptTemplate`,
gets all completions of a turn from its back-end in one batched call, and parses the ``<action>`` out
of each. Every step keeps the raw output, the parsed action, the format verdict and the token counts
(``AgentAction.output / prompt_tokens / completion_tokens / format_valid``), which the episode log stores.

Back-ends implement ``complete(chats, *, max_new_tokens, temperature, top_p, stop, seed) -> list[ChatResult]``:
:class:`HFChat` here (batched ``generate`` with left padding, stop at ``</action>``) and
:class:`~agentgym.agents.openai_agent.OpenAIChat` for API and served models.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.agent_io import AgentAction, AgentInput, Generation
from agentgym.prompts import PromptTemplate, get_template


@dataclass
class ChatResult:
    """One chat completion: its text and token counts (and, from token-level back-ends, the tokens)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    prompt_ids: list[int] | None = None
    ids: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_cut: bool = False


def fit_messages(
    template: PromptTemplate,
    inp: AgentInput,
    *,
    history_length: int,
    fits: Callable[[list[dict[str, str]]], bool] | None,
    kwargs: dict[str, Any],
) -> list[dict[str, str]]:
    """``template.build`` with fewer past turns until ``fits(messages)`` (a back-end's length check).

    An "all history" template (``history_length < 0``, ReAct) falls back to a two-turn window first; at zero
    past turns the messages are returned as they are and the back-end keeps their last tokens.
    """
    h = history_length
    while True:
        messages = template.build(inp, history_length=h, **kwargs)
        if fits is None or fits(messages):
            return messages
        if h > 0:
            h -= 1
        elif h < 0:
            h = 2
        else:
            return messages


class HFChat:
    """Chat back-end over a transformers causal LM: one batched ``generate`` per ``complete`` call.

    Args:
        model: HF id, local folder, ``"smollm2"`` (the offline SmolLM2-135M checkpoint), or a loaded model.
        tokenizer: needed when ``model`` is a loaded model.
        device, dtype: see :func:`agentgym.models.loading.load_model`.
        revision, checkpoint_sha256: the model pins of :func:`~agentgym.models.loading.load_model` (a hub commit;
            a local folder's files); weights that are not the pinned ones raise ``ModelPinError``.
        max_prompt_tokens: the prompt budget: :class:`LLMAgent` drops past turns until a prompt fits, then
            the prompt keeps its last tokens (counted in ``truncated_prompts``).
        return_logprobs: return each sampled token's log-prob (RL rollouts).
        suppress_token_ids: ids never sampled (SAPO's reserved tokens, a restricted vocabulary).

    :meth:`from_generator` wraps an existing generator (the trainer's, shared with its training model).
    ``generation_s`` sums the time spent in ``generate``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: Any = None,
        dtype: Any = None,
        revision: str | None = None,
        checkpoint_sha256: str | None = None,
        max_prompt_tokens: int = 4096,
        return_logprobs: bool = False,
        suppress_token_ids: Sequence[int] | None = None,
    ) -> None:
        from agentgym.models.generation import HFGenerator

        if isinstance(model, (str, Path)):
            from agentgym.models.loading import load_model

            self.model_name = str(model)
            model, tokenizer = load_model(
                model, dtype=dtype, device=device, revision=revision, checkpoint_sha256=checkpoint_sha256
            )
        else:
            if tokenizer is None:
                raise ValueError("pass the tokenizer together with a loaded model")
            self.model_name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        self.model = model
        self._setup(HFGenerator(model, tokenizer), tokenizer, max_prompt_tokens, return_logprobs, suppress_token_ids)

    @classmethod
    def from_generator(
        cls,
        generator: Any,
        tokenizer: Any,
        *,
        max_prompt_tokens: int = 4096,
        return_logprobs: bool = False,
        suppress_token_ids: Sequence[int] | None = None,
        model_name: str = "",
    ) -> HFChat:
        """A back-end over ``generator`` (anything with :class:`~agentgym.models.generation.HFGenerator`'s
        ``generate``) and its ``tokenizer``."""
        self = cls.__new__(cls)
        self.model = getattr(generator, "model", None)
        self.model_name = model_name
        self._setup(generator, tokenizer, max_prompt_tokens, return_logprobs, suppress_token_ids)
        return self

    def _setup(self, generator, tokenizer, max_prompt_tokens, return_logprobs, suppress_token_ids) -> None:
        self.generator, self.tokenizer = generator, tokenizer
        self.max_prompt_tokens = max_prompt_tokens
        self.return_logprobs = return_logprobs
        self.suppress_token_ids = list(suppress_token_ids) if suppress_token_ids else None
        self.truncated_prompts = 0
        self.generation_s = 0.0
        self._measured: dict[int, tuple[list[dict[str, str]], list[int]]] = {}

    def _ids(self, messages: list[dict[str, str]]) -> list[int]:
        from agentgym.models.generation import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages)

    def fits(self, messages: list[dict[str, str]]) -> bool:
        """The prompt is within ``max_prompt_tokens`` (its tokens are kept for :meth:`encode`)."""
        ids = self._ids(messages)
        self._measured[id(messages)] = (messages, ids)  # the reference keeps the id unique until encode
        return len(ids) <= self.max_prompt_tokens

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        seen = self._measured.get(id(messages))
        ids = list(seen[1]) if seen is not None and seen[0] is messages else self._ids(messages)
        if len(ids) > self.max_prompt_tokens:
            self.truncated_prompts += 1
            ids = ids[-self.max_prompt_tokens :]
        return ids

    def complete(
        self,
        chats: Sequence[list[dict[str, str]]],
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        top_k: int = 0,
    ) -> list[ChatResult]:
        """Complete every chat in one batched generation (``top_k`` 0: no top-k cut)."""
        prompts, cut = [], []
        for c in chats:
            n = self.truncated_prompts
            prompts.append(self.encode(c))
            cut.append(self.truncated_prompts > n)  # encode() counts the prompts it cut
        self._measured.clear()
        t0 = time.perf_counter()
        outs = self.generator.generate(
            prompts,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop_strings=list(stop) if stop else None,
            return_logprobs=self.return_logprobs,
            suppress_token_ids=self.suppress_token_ids,
            seed=seed,
            **({"top_k": top_k} if top_k else {}),
        )
        self.generation_s += time.perf_counter() - t0
        return [
            ChatResult(
                o.text,
                len(p),
                len(o.ids),
                o.finish_reason,
                prompt_ids=p,
                ids=list(o.ids),
                logprobs=o.logprobs if self.return_logprobs else None,
                prompt_cut=c,
            )
            for p, o, c in zip(prompts, outs, cut)
        ]


class LLMAgent:
    """A prompting agent: template -> back-end -> ``<action>`` parser, batched across episodes.

    Args:
        backend: an :class:`HFChat`, an :class:`~agentgym.agents.openai_agent.OpenAIChat`, or anything
            with the same ``complete``; a string/path builds an :class:`HFChat`.
        template: the prompt template; default ``get_template(env_id, style)`` per env.
        style: template style when ``template`` is None (e.g. ``"erl"`` for the grid games).
        temperature, top_p, max_new_tokens: sampling (verl-agent validates at temperature 0.4).
        top_k: sample among the k most likely tokens (0: no cut; passed to the back-end only when set).
        history_length: past turns shown in each prompt (verl-agent: 2; ``-1``: all).
        seed: base sampling seed; call k of a run uses ``seed + k`` (reproducible on one machine).
        name: agent name in logs (default ``llm:<model>``).
    """

    def __init__(
        self,
        backend: Any,
        *,
        template: PromptTemplate | None = None,
        style: str | None = None,
        temperature: float = 0.4,
        top_p: float = 1.0,
        max_new_tokens: int = 512,
        history_length: int = 2,
        seed: int | None = 0,
        name: str | None = None,
        top_k: int = 0,
    ) -> None:
        if isinstance(backend, (str, Path)):
            backend = HFChat(backend)
        self.backend = backend
        self.template = template
        self.style = style
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.max_new_tokens = max_new_tokens
        self.history_length = history_length
        self.seed = seed
        self._calls = 0
        self._templates: dict[str, PromptTemplate] = {}
        self.name = name or f"llm:{getattr(backend, 'model_name', type(backend).__name__)}"

    # -- hooks for subclasses (ReAct, Reflexion) --------------------------------------------------
    def template_for(self, env_id: str) -> PromptTemplate:
        if self.template is not None:
            return self.template
        if env_id not in self._templates:
            self._templates[env_id] = get_template(env_id, self.style)
        return self._templates[env_id]

    def build_kwargs(self, inp: AgentInput) -> dict[str, Any]:
        """Extra ``template.build`` kwargs for one episode (``lesson``/``reflection``/``system``)."""
        return {}

    def messages(self, inp: AgentInput) -> list[dict[str, str]]:
        """The chat prompt for one episode's current turn (fewer past turns when the back-end says it is too long)."""
        return fit_messages(
            self.template_for(inp.env_id),
            inp,
            history_length=self.history_length,
            fits=getattr(self.backend, "fits", None),
            kwargs=self.build_kwargs(inp),
        )

    # -- Agent protocol ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        self._calls = 0
        if seed is not None:
            self.seed = seed

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "model": getattr(self.backend, "model_name", ""),
            "temperature": self.temperature,
            "top_p": self.top_p,
            **({"top_k": self.top_k} if self.top_k else {}),
            "max_new_tokens": self.max_new_tokens,
            "history_length": self.history_length,
            "seed": self.seed,
        }
        if self.template is not None:
            cfg.update(self.template.config())
        else:
            cfg.update({"template_style": self.style})
            cfg.update({f"template:{k}": t.id for k, t in self._templates.items()})
        return cfg

    def complete(self, chats: list[list[dict[str, str]]], stop: Sequence[str] | None) -> list[ChatResult]:
        seed = None if self.seed is None else self.seed + self._calls
        self._calls += 1
        return self.backend.complete(
            chats,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=stop,
            seed=seed,
            **({"top_k": self.top_k} if self.top_k else {}),
        )

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        """One batched completion for all ``inputs``; parse each into an action."""
        if not inputs:
            return []
        chats = [self.messages(x) for x in inputs]
        templates = [self.template_for(x.env_id) for x in inputs]
        stops = sorted({s for t in templates for s in t.stop_strings})
        results = self.complete(chats, stops or None)
        out = []
        for tpl, chat, res in zip(templates, chats, results):
            parsed = tpl.parse(res.text)
            extras: dict[str, Any] = {"finish_reason": res.finish_reason, "template": tpl.id}
            if not parsed.valid:
                extras["format_reason"] = parsed.reason
            out.append(
                AgentAction(
                    action=parsed.action,
                    output=res.text,
                    prompt_tokens=res.prompt_tokens,
                    completion_tokens=res.completion_tokens,
                    format_valid=parsed.valid,
                    extras=extras,
                    generation=None
                    if res.prompt_ids is None or res.ids is None
                    else Generation(chat, res.prompt_ids, res.ids, res.logprobs, res.prompt_cut),
                )
            )
        return out
