"""SEED's analyser prompt (arXiv 2607.14777): the policy reads its own transcript and writes one lesson.

After each episode the frozen previous policy is asked, in a prompt that demands JSON only, for the
paper's two fields:

* ``"episode_summary"``: what happened in the episode (on success, the decision rule and the order of
  actions that solved it; on failure, the core mistake and the warning signs that preceded it);
* ``"episode_skill"``: the reusable skill distilled from it, one or two sentences -- the *lesson*.

The lesson (``episode_skill``) is later inserted into the task prompt of the teacher branch
(``PromptTemplate.build(..., lesson=...)``, right after "Your task is to: ..."), and the whole object is the
target of SEED's SFT stage (trajectory -> lesson).

:func:`parse_lesson` is strict about what it accepts (a JSON object with a non-empty ``episode_skill``)
and lenient about what surrounds it (code fences, ``<think>`` blocks, text before or after the object), and
raises :class:`LessonParseError` with the reason otherwise; the lesson-writer hook retries and then falls
back (see ``agentgym.rl.hooks.LessonWriter``). Version 1 asked for ``workflow`` / ``mistake`` /
``warning_signs`` / ``lesson`` fields instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agentgym.episodes import Episode
from agentgym.prompts.reflection import episode_transcript

#: Bump when the analyser text or the parsing rules change.
VERSION = "seed-lesson-v2"

#: Lessons longer than this many words are cut: the teacher prompt must stay short.
MAX_LESSON_WORDS = 60

ANALYSER_SYSTEM = (
    "You analyse an agent's episode in a text environment and distil it into one reusable skill. "
    "Answer with a single JSON object and nothing else."
)

#: The paper's lesson fields, in the order the analyser writes them.
FIELDS: tuple[str, ...] = ("episode_summary", "episode_skill")

_SUCCESS_SCHEMA = (
    '{"episode_summary": "<the core decision rule and the order of actions that worked>", '
    '"episode_skill": "<one or two sentences a future attempt can follow>"}'
)
_FAILURE_SCHEMA = (
    '{"episode_summary": "<the core mistake and what showed it was going wrong>", '
    '"episode_skill": "<one or two sentences: what to avoid and what to do instead>"}'
)


class LessonParseError(ValueError):
    """The analyser's reply held no usable lesson; ``str(err)`` says why."""


@dataclass
class Lesson:
    """A parsed analyser reply."""

    lesson: str  # the episode_skill
    outcome: str  # "success" | "failure" | "unknown" (the episode's, when the caller knows it)
    fields: dict[str, Any] = field(default_factory=dict)  # episode_summary (and episode_skill) as given

    def to_dict(self) -> dict[str, Any]:
        return {"lesson": self.lesson, "outcome": self.outcome, **{k: v for k, v in self.fields.items()}}

    def target(self) -> dict[str, str]:
        """The analyser reply as the paper's JSON object (the SFT target)."""
        return {
            "episode_summary": _as_text(self.fields.get("episode_summary")),
            "episode_skill": _as_text(self.fields.get("episode_skill")) or self.lesson,
        }


def build_lesson_messages(episode: Episode, *, max_chars: int = 6000) -> list[dict[str, str]]:
    """The analyser chat for one finished episode (the schema asked for depends on its outcome)."""
    success = episode.success
    schema = _SUCCESS_SCHEMA if success else _FAILURE_SCHEMA
    ask = (
        "The episode succeeded. Summarise the workflow that made it succeed and distil it into a skill."
        if success
        else "The episode failed. Summarise the core mistake and its warning signs and distil them into a skill "
        "that avoids it."
    )
    user = (
        f"## Episode ({'success' if success else 'failure'}, return {episode.total_return:g}, "
        f"{episode.length} steps)\n{episode_transcript(episode, max_chars=max_chars)}\n\n"
        f"{ask} Keep the skill under {MAX_LESSON_WORDS // 2} words and general enough to reuse on a similar "
        f"task.\nReply with JSON only, exactly in this form:\n{schema}"
    )
    return [{"role": "system", "content": ANALYSER_SYSTEM}, {"role": "user", "content": user}]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_THINK = re.compile(r"<think>.*?</think>", re.S)


def _json_objects(text: str):
    """Every top-level ``{...}`` substring that parses as a JSON object, in order."""
    decoder = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            yield obj
        i = text.find("{", end)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "; ".join(_as_text(v) for v in value if _as_text(v))
    return ""


def _cut(text: str, max_words: int) -> str:
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words]) + " ..."


def parse_lesson(text: str, *, max_words: int = MAX_LESSON_WORDS) -> Lesson:
    """The lesson in an analyser reply, or :class:`LessonParseError`.

    Accepts the first JSON object (inside code fences or not) with a non-empty ``"episode_skill"`` (the
    lesson); ``"episode_summary"`` is kept in ``fields``.
    """
    if not isinstance(text, str) or not text.strip():
        raise LessonParseError("empty reply")
    body = _THINK.sub("", text)
    candidates = [m.group(1) for m in _FENCE.finditer(body)] + [body]
    seen_object = False
    for chunk in candidates:
        for obj in _json_objects(chunk):
            seen_object = True
            outcome = str(obj.get("outcome", "")).strip().lower()
            lesson = _as_text(obj.get("episode_skill"))
            if lesson:
                lesson = _cut(lesson, max_words)
                fields = {"episode_summary": _as_text(obj.get("episode_summary")), "episode_skill": lesson}
                if outcome not in ("success", "failure"):
                    outcome = "unknown"
                return Lesson(lesson=lesson, outcome=outcome, fields=fields)
    if seen_object:
        raise LessonParseError("JSON object has no non-empty 'episode_skill'")
    raise LessonParseError("no JSON object in the reply")
