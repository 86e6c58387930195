"""Helpers for tiny-model runs on CPU: a bare prompt template and a restricted action vocabulary.

A tiny random model cannot discover the ``<action>...</action>`` answer format by sampling, so the CPU
learning tests play ``agentgym/EchoBandit-v0`` with the :class:`BarePromptTemplate` (the prompt is the
observation, the whole output is the action) and let the policy sample only the tokens of the env's
words (every other id is suppressed in generation *and* excluded from the training softmax, exactly as
SAPO's reserved tokens are). The starting success rate is then well above 0 and learning must come from
the RL update. None of this is used by the table configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.agent_io import AgentInput
from agentgym.prompts import ParsedAction, PromptTemplate


class BarePromptTemplate(PromptTemplate):
    """User message = the current observation; action = the stripped output (invalid when empty)."""

    name = "bare"
    version = "1"
    source = "agentgym tiny-model tests"
    system_prompt = None
    stop_strings = ()

    def user_prompt(self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None) -> str:
        return inp.observation

    def parse(self, output: str) -> ParsedAction:
        action = (output or "").strip()
        if not action:
            return ParsedAction(action="", valid=False, reason="empty output")
        return ParsedAction(action=action, valid=True)


def add_word_tokens(model: Any, tokenizer: Any, words: Sequence[str]) -> list[int]:
    """Make each word one token (added tokens, embeddings resized); returns their ids.

    The tiny BPE splits most words into pieces; one token per word keeps a one-token action space.
    """
    new = [w for w in words if len(tokenizer.encode(w, add_special_tokens=False)) != 1]
    if new:
        tokenizer.add_tokens(list(new))
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    return [tokenizer.encode(w, add_special_tokens=False)[0] for w in words]


def suppress_all_but(tokenizer: Any, words: Sequence[str], *, allow_eos: bool = True, vocab_size: int | None = None):
    """Ids to suppress so that only the tokens of ``words`` (and EOS) can be sampled."""
    allowed: set[int] = set()
    for w in words:
        allowed.update(tokenizer.encode(w, add_special_tokens=False))
    if allow_eos and tokenizer.eos_token_id is not None:
        allowed.add(int(tokenizer.eos_token_id))
    n = int(vocab_size if vocab_size is not None else len(tokenizer))
    return [i for i in range(n) if i not in allowed]


def add_restricted_words(model: Any, tokenizer: Any, args: Any) -> None:
    """With ``args.restrict_vocab`` on the tiny model: make each allowed word one token (:func:`add_word_tokens`)."""
    if args.restrict_vocab and args.model == "tiny":
        add_word_tokens(model, tokenizer, args.restrict_vocab)


def restricted_vocab_exclusions(tokenizer: Any, args: Any, *, vocab_size: int) -> list[int]:
    """The ids a run with ``args.restrict_vocab`` never samples (:func:`suppress_all_but`); none without it."""
    if not args.restrict_vocab:
        return []
    return suppress_all_but(tokenizer, args.restrict_vocab, allow_eos=args.allow_eos, vocab_size=vocab_size)


class BareContextTemplate(BarePromptTemplate):
    """The tiny-model ``bare`` template with the lesson/reflection shown before the observation (ERL, SEED)."""

    name = "bare-context"

    def user_prompt(self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None) -> str:
        ctx = " ".join(x.strip() for x in (lesson, reflection) if x and x.strip())
        return f"{ctx}\n{inp.observation}" if ctx else inp.observation
