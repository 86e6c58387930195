"""Episode-end hooks of the training methods (DESIGN.md section 4): SEED's lesson writer, ERL's reflection log.

Both annotate an episode *after* it ends and before it is written, so the JSONL log holds the lesson or
reflection next to the episode it came from (``Episode.extras``). They are :class:`DeferredHooks`: the
rollout engine fires ``on_episode_end`` as episodes finish; the hook keeps them until :meth:`flush`,
which annotates them in one batch (one batched ``generate`` call for all lessons, not one per episode)
and then forwards every event to its downstream hooks (e.g. a :class:`agentgym.episodes.JsonlWriter`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentgym.episodes import Episode, Step
from agentgym.prompts.lesson import VERSION as LESSON_VERSION
from agentgym.prompts.lesson import LessonParseError, build_lesson_messages, parse_lesson

#: ``analyse(chats) -> replies``: one reply per chat (a list of ``{"role", "content"}`` messages).
Analyser = Callable[[list[list[dict[str, str]]]], list[str]]


def _forward(hooks: Sequence[Any], name: str, *args: Any) -> None:
    for hook in hooks:
        fn = getattr(hook, name, None)
        if fn is not None:
            fn(*args)


class DeferredHooks:
    """Holds finished episodes until :meth:`flush`, annotates them, then passes them to ``then`` hooks.

    Args:
        then: downstream hooks (writers, loggers); they see ``on_reset``/``on_step`` at once and
            ``on_episode_end`` after annotation.
    """

    def __init__(self, then: Sequence[Any] = ()) -> None:
        self.then = list(then)
        self.pending: list[Episode] = []

    def on_reset(self, episode: Episode) -> None:
        _forward(self.then, "on_reset", episode)

    def on_step(self, episode: Episode, step: Step) -> None:
        _forward(self.then, "on_step", episode, step)

    def on_episode_end(self, episode: Episode) -> None:
        self.pending.append(episode)

    def annotate(self, episodes: list[Episode]) -> None:
        """Fill ``Episode.extras`` of a batch of finished episodes (subclasses)."""

    def flush(self) -> list[Episode]:
        """Annotate the pending episodes, forward them downstream and return them."""
        episodes, self.pending = self.pending, []
        if episodes:
            self.annotate(episodes)
        for episode in episodes:
            _forward(self.then, "on_episode_end", episode)
        return episodes


class LessonWriter(DeferredHooks):
    """SEED's lesson writer: the policy analyses each finished episode and its lesson lands in ``extras``.

    Each episode gets ``extras["seed"] = {"lesson", "outcome", "fields", "raw", "attempts", "error", "version"}``
    and ``extras["lesson"]`` (the lesson string, or None). A reply that is not valid JSON with a lesson is
    asked for again (``max_retries`` more batched calls for the failed ones); after that the episode keeps
    ``lesson = None`` (SEED's distillation term then skips it) and the error is recorded. Nothing here raises
    on a malformed reply; the counts are in :meth:`metrics` under ``seed/lesson_parse_failures``.

    Args:
        analyse: batched chat function, e.g. :func:`chat_analyser`; or an analyser that reads the finished
            episodes themselves (``analyse.reads_episodes`` true, e.g. the privileged
            :class:`agentgym.agents.oracle.OracleAnalyser`).
        max_retries: extra attempts for replies that did not parse.
        then: downstream hooks.
    """

    def __init__(self, analyse: Analyser, *, max_retries: int = 2, then: Sequence[Any] = ()) -> None:
        super().__init__(then)
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.analyse = analyse
        self.max_retries = max_retries
        self.reset_metrics()

    def reset_metrics(self) -> None:
        self.n_episodes = 0
        self.n_parse_failures = 0
        self.n_fallbacks = 0
        self.n_replies = 0

    def metrics(self, reset: bool = True) -> dict[str, float]:
        """``seed/lesson_parse_failures`` (replies that did not parse, retries included),
        ``seed/lesson_fallbacks`` (episodes left without a lesson), ``seed/lesson_rate`` (episodes with a lesson)
        and ``seed/lesson_parse_rate`` (analyser replies that parsed, retries included)."""
        out = {
            "seed/lesson_parse_failures": float(self.n_parse_failures),
            "seed/lesson_fallbacks": float(self.n_fallbacks),
            "seed/lesson_rate": 1.0 - self.n_fallbacks / self.n_episodes if self.n_episodes else 0.0,
            "seed/lesson_parse_rate": 1.0 - self.n_parse_failures / self.n_replies if self.n_replies else 0.0,
        }
        if reset:
            self.reset_metrics()
        return out

    def annotate(self, episodes: list[Episode]) -> None:
        reads_episodes = getattr(self.analyse, "reads_episodes", False)
        chats = [] if reads_episodes else [build_lesson_messages(ep) for ep in episodes]
        records: list[dict[str, Any]] = [
            {"lesson": None, "outcome": None, "fields": {}, "raw": [], "attempts": 0, "error": None} for _ in episodes
        ]
        todo = list(range(len(episodes)))
        for _ in range(1 + self.max_retries):
            if not todo:
                break
            if getattr(self.analyse, "reads_episodes", False):
                replies = self.analyse([episodes[i] for i in todo])
            else:
                replies = self.analyse([chats[i] for i in todo])
            self.n_replies += len(replies)
            if len(replies) != len(todo):
                raise RuntimeError(f"analyser returned {len(replies)} replies for {len(todo)} chats")
            failed = []
            for i, reply in zip(todo, replies):
                rec = records[i]
                rec["raw"].append(reply)
                rec["attempts"] += 1
                try:
                    lesson = parse_lesson(reply)
                except LessonParseError as err:
                    self.n_parse_failures += 1
                    rec["error"] = str(err)
                    failed.append(i)
                    continue
                rec.update(lesson=lesson.lesson, outcome=lesson.outcome, fields=lesson.fields, error=None)
            todo = failed
        self.n_episodes += len(episodes)
        self.n_fallbacks += len(todo)
        for ep, rec in zip(episodes, records):
            ep.extras["seed"] = {**rec, "version": LESSON_VERSION}
            ep.extras["lesson"] = rec["lesson"]


class ReflectionLog(DeferredHooks):
    """ERL's log: each attempt's episode is written with ``extras["erl"]`` (its reflection, memory, rewards).

    ERL knows a first attempt's reflection and second-attempt reward only after the second attempt has
    run, so first attempts wait here; the training loop calls :meth:`record` on each, then :meth:`flush`.
    """

    def record(self, episode: Episode, entry: dict[str, Any]) -> None:
        """Merge ``entry`` into ``episode.extras["erl"]``."""
        episode.extras.setdefault("erl", {}).update(entry)


def encode_chat(tokenizer: Any, messages: list[dict[str, str]], max_tokens: int | None = None) -> list[int]:
    """Token ids of a chat with the generation prompt; keeps the *last* ``max_tokens`` ids if too long."""
    from agentgym.models.generation import chat_prompt_ids

    ids = chat_prompt_ids(tokenizer, messages)
    if max_tokens is not None and len(ids) > max_tokens:
        ids = ids[-max_tokens:]
    return ids


def chat_analyser(
    generator: Any,
    tokenizer: Any,
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.7,
    max_prompt_tokens: int = 4096,
    seed: int | None = None,
) -> Analyser:
    """A batched :data:`Analyser` over an ``HFGenerator``-like object (``generate(prompts, ...) -> [Completion]``)."""
    calls = [0]

    def analyse(chats: list[list[dict[str, str]]]) -> list[str]:
        prompts = [encode_chat(tokenizer, chat, max_prompt_tokens) for chat in chats]
        calls[0] += 1
        outs = generator.generate(
            prompts,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=None if seed is None else seed + calls[0],
        )
        return [c.text for c in outs]

    return analyse
