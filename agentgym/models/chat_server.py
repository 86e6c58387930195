"""The model side of ``agentgym serve``: :class:`ChatServer` turns validated chat requests into engine requests,
and :class:`TextAssembler` builds each choice's text (and log-probs) token by token.

The HTTP layer (:mod:`agentgym.models.openai_http`) and the command (:mod:`agentgym.models.serve`) sit on top.
"""

from __future__ import annotations

import functools
from typing import Any

from agentgym.models import tool_calls
from agentgym.models.openai_schema import (
    ChatCompletionRequest,
    ParamError,
    TokenLogprob,
    TopLogprob,
)
from agentgym.models.serving_engine import Engine, GenRequest, TokenEvent
from agentgym.models.tool_calls import ToolPlan

DEFAULT_MAX_BODY = 4 * 1024 * 1024


# -- text of a choice ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The inverse of byte-level BPE's byte -> printable-character table (GPT-2's ``bytes_to_unicode``)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


class TokenText:
    """Text and raw bytes of single tokens (for ``logprobs``), cached per id."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def __call__(self, token: int) -> tuple[str, list[int]]:
        hit = self._cache.get(token)
        if hit is None:
            piece = self.tokenizer.convert_ids_to_tokens(token)
            table = _byte_decoder()
            if token not in self.special and isinstance(piece, str) and piece and all(c in table for c in piece):
                raw = bytes(table[c] for c in piece)  # byte-level BPE: the exact bytes, even half a character
            elif isinstance(piece, str) and len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                raw = bytes([int(piece[3:5], 16)])  # SentencePiece byte fallback
            else:
                raw = self.tokenizer.decode([token], skip_special_tokens=False).encode("utf-8")
            hit = self._cache[token] = (raw.decode("utf-8", errors="replace"), list(raw))
        return hit


class TextAssembler:
    """A choice's text, built token by token: emits only text that is final (no half characters, nothing that
    may turn out to start a stop string) and ends the text before the first stop string."""

    def __init__(self, tokenizer: Any, stop: tuple[str, ...]) -> None:
        self.tokenizer = tokenizer
        self.stop = stop
        self.ids: list[int] = []
        self.text = ""
        self.sent = 0
        self.stopped = False
        self._prefix = self._read = 0

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def add(self, token: int, incremental: bool = True) -> str:
        """Append ``token``; return the newly final text (always "" when not ``incremental``)."""
        self.ids.append(token)
        if not incremental or self.stopped:
            return ""
        before = self._decode(self.ids[self._prefix : self._read])
        after = self._decode(self.ids[self._prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self.text += after[len(before) :]
            self._prefix, self._read = self._read, len(self.ids)
        return self._emit(final=False)

    def _cut_at_stop(self, start: int) -> None:
        hits = [i for i in (self.text.find(s, start) for s in self.stop) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            self.stopped = True

    def _emit(self, final: bool) -> str:
        if self.stop and not self.stopped:
            self._cut_at_stop(max(0, self.sent - max(len(s) for s in self.stop)))
        end = len(self.text)
        if not final and not self.stopped and self.stop:
            for k in range(min(len(self.text), max(len(s) for s in self.stop) - 1), 0, -1):
                if any(s.startswith(self.text[-k:]) for s in self.stop):
                    end -= k  # may be the start of a stop string: hold it back
                    break
        end = max(end, self.sent)  # text already sent stays sent
        delta = self.text[self.sent : end]
        self.sent = end
        return delta

    def finish(self) -> str:
        """The rest of the text; the whole text is then ``decode(ids)`` cut before the first stop string."""
        full = self._decode(self.ids)
        if full.startswith(self.text[: self.sent]):
            self.text, self.stopped = full, False
            self._cut_at_stop(0)
        return self._emit(final=True)


# -- the app ---------------------------------------------------------------------------------------------------
class ChatServer:
    """The served model: an :class:`~agentgym.models.serving_engine.Engine` plus the limits requests are checked against.

    Args:
        model, tokenizer: a loaded causal LM and its tokenizer.
        name: the model id clients send (``/v1/models`` lists it; other names get a 404).
        max_tokens_cap: most completion tokens one choice may ask for.
        default_max_tokens: completion length when the request gives none (cut to the context left).
        max_body_bytes: request bodies above this get a 413.
        **engine_kwargs: :class:`~agentgym.models.serving_engine.Engine` options (``max_batch``, ``slice_tokens``, ...).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "agentgym",
        max_tokens_cap: int = 4096,
        default_max_tokens: int = 256,
        max_body_bytes: int = DEFAULT_MAX_BODY,
        **engine_kwargs: Any,
    ) -> None:
        self.engine = Engine(model, tokenizer, **engine_kwargs)
        self.tokenizer = tokenizer
        self.name = name
        self.cap = max_tokens_cap
        self.default_max_tokens = default_max_tokens
        self.max_body_bytes = max_body_bytes
        self.token_text = TokenText(tokenizer)
        self.context = self.engine.context_length
        # Every token holds at least one byte and at most this many: a prompt of B bytes has >= B / this tokens,
        # so a body far past the context is refused without tokenizing it.
        self.max_token_bytes = max(
            (len(self.token_text(i)[1]) for i in range(len(tokenizer)) if i not in self.token_text.special),
            default=1,
        )

    @property
    def batches(self) -> list[int]:
        """Rows of every batch the engine formed (tests and logs)."""
        return self.engine.batches

    def close(self) -> None:
        self.engine.close()

    def prepare(self, req: ChatCompletionRequest) -> tuple[GenRequest, ToolPlan]:
        """Check ``req`` against the model and tokenize it; raises :class:`ParamError` (a 4xx).

        Returns the engine request and the request's :class:`~agentgym.models.tool_calls.ToolPlan` (how its
        replies are parsed into tool calls).
        """
        req.check()
        tool_plan = tool_calls.plan(req.tools, req.tool_choice, req.parallel_tool_calls)
        if req.model != self.name:
            raise ParamError("model", f"the model {req.model!r} does not exist: this server serves {self.name!r}", 404)
        if req.n is not None and req.n > self.engine.max_batch:
            raise ParamError("n", f"n must be at most {self.engine.max_batch} (the server's --max-batch)")
        asked = req.max_completion_tokens or req.max_tokens
        param = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        if asked is not None and asked > self.cap:
            raise ParamError(param, f"{param} must be at most {self.cap} (the server's --max-tokens-cap)")
        text_bytes = sum(len((m.content or "").encode("utf-8")) for m in req.messages)
        if text_bytes // self.max_token_bytes >= self.context:
            raise ParamError("messages", self._too_long(f"at least {text_bytes // self.max_token_bytes}", asked or 1))
        from agentgym.models.generation import chat_prompt_ids

        plain = not tool_plan.tools and all(m.role != "tool" and not m.tool_calls for m in req.messages)
        if plain:  # no tools anywhere: the prompt every other path of agentgym builds
            messages = [
                {"role": "system" if m.role == "developer" else m.role, "content": m.content} for m in req.messages
            ]
            prompt = chat_prompt_ids(self.tokenizer, messages)
        else:
            try:
                text = tool_calls.render(self.tokenizer, [m.model_dump() for m in req.messages], tool_plan)
            except Exception as exc:  # a template error (e.g. one that rejects a role order) is the request's
                raise ParamError("messages", f"the chat template cannot render these messages: {exc}") from None
            prompt = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if not prompt:
            raise ParamError("messages", "the messages render to an empty prompt")
        room = self.context - len(prompt)
        if asked is None:
            asked = min(self.default_max_tokens, room)
        if asked < 1 or len(prompt) + asked > self.context:
            raise ParamError("messages", self._too_long(str(len(prompt)), max(asked, 1)))
        gen = GenRequest(
            prompt=prompt,
            n=req.n or 1,
            max_tokens=asked,
            temperature=1.0 if req.temperature is None else float(req.temperature),
            top_p=1.0 if req.top_p is None else float(req.top_p),
            stop=tuple(req.stop or ()),
            seed=None if req.seed is None else req.seed % 2**63,
            logprobs=bool(req.logprobs),
            top_logprobs=req.top_logprobs or 0,
        )
        return gen, tool_plan

    def _too_long(self, prompt: str, asked: int) -> str:
        return (
            f"this model's maximum context length is {self.context} tokens, but the messages take {prompt} tokens "
            f"and {asked} more were requested for the completion: shorten the messages or lower max_tokens"
        )

    def logprob_entry(self, ev: TokenEvent) -> TokenLogprob:
        text, raw = self.token_text(ev.token)
        top = []
        for tid, lp in ev.top or []:
            t_text, t_raw = self.token_text(tid)
            top.append(TopLogprob(token=t_text, logprob=lp, bytes=t_raw))
        return TokenLogprob(token=text, logprob=float(ev.logprob or 0.0), bytes=raw, top_logprobs=top)
