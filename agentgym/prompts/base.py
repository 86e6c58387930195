"""Prompt templates and the action parser shared by every env's prompts.

A :class:`PromptTemplate` turns an :class:`~agentgym.agents.base.AgentInput` into chat messages and parses
the model's answer back into an action. All our templates ask for ``<think>…</think><action>…</action>``
(the verl-agent / GiGPO answer format); the action is the text inside the *last* ``<action>`` tags.

Templates are versioned: anything that can change a score (wording, history length default, parsing)
bumps :attr:`PromptTemplate.version`, and the version is stored in every episode log via the agent config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentgym.agent_io import AgentInput

#: The answer format's patterns; :func:`_blocks` gives ``findall``'s result in linear time (the lazy ``(.*?)``
#: rescans to the end from every unclosed opening: 64 KB of ``<action>`` took 12 s).
_ACTION_RE = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_ACTION_OPEN = re.compile(r"<action>", re.IGNORECASE)
_ACTION_CLOSE = re.compile(r"</action>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def _blocks(text: str, open_re: re.Pattern[str], close_re: re.Pattern[str]) -> list[str]:
    """``re.findall(open + "(.*?)" + close, text, DOTALL | IGNORECASE)``, in linear time.

    findall takes the first opening tag, the first closing tag after it, and goes on after that closing tag;
    once an opening tag has no closing tag after it, no later one has.
    """
    closes = [(m.start(), m.end()) for m in close_re.finditer(text)]
    out: list[str] = []
    pos, c = 0, 0
    for m in open_re.finditer(text):
        if m.start() < pos:
            continue
        while c < len(closes) and closes[c][0] < m.end():
            c += 1
        if c == len(closes):
            break
        out.append(text[m.end() : closes[c][0]])
        pos = closes[c][1]
    return out


#: CJK Unified Ideographs: verl-agent's projection marks an answer invalid when it contains them
#: (Qwen models drift into Chinese under RL; the env would not understand the action).
_CJK_RE = re.compile(r"[\u4e00-\u9fff]")


@dataclass
class ParsedAction:
    """The result of parsing one model output.

    Attributes:
        action: the text inside the last ``<action>…</action>`` (stripped); ``""`` when there is none.
        valid: False when the output breaks the answer format (the step counts as a format error).
        reason: why it is invalid (None when valid).
        think: the text inside the last ``<think>…</think>``, when present.
    """

    action: str
    valid: bool
    reason: str | None = None
    think: str | None = None


def parse_action(output: str, *, require_think: bool = False, reject_cjk: bool = False) -> ParsedAction:
    """Extract the action from a ``<think>…</think><action>…</action>`` answer.

    Args:
        output: the raw model text.
        require_think: also require a ``<think>…</think>`` block (verl-agent's ALFWorld/WebShop check).
        reject_cjk: mark outputs containing CJK ideographs invalid (verl-agent's check).

    Returns:
        A :class:`ParsedAction`. Several ``<action>`` blocks: the last one counts. An unclosed ``<action>``
        at the very end (generation cut by the token limit) is not an action.
    """
    text = output or ""
    think = None
    think_blocks = _blocks(text, _THINK_OPEN, _THINK_CLOSE)
    if think_blocks:
        think = think_blocks[-1].strip()
    matches = _blocks(text, _ACTION_OPEN, _ACTION_CLOSE)
    if not matches:
        return ParsedAction(action="", valid=False, reason="missing <action>...</action> tags", think=think)
    action = matches[-1].strip()
    if not action:
        return ParsedAction(action="", valid=False, reason="empty <action></action>", think=think)
    if require_think and not (_THINK_OPEN.search(text) and _THINK_CLOSE.search(text)):
        return ParsedAction(action=action, valid=False, reason="missing <think>...</think> tags", think=think)
    if reject_cjk and _CJK_RE.search(text):
        return ParsedAction(action=action, valid=False, reason="output contains CJK characters", think=think)
    return ParsedAction(action=action, valid=True, think=think)


def extract_task(inp: AgentInput) -> str:
    """The task sentence of an episode: ``info["task"]``/``info["instruction"]`` or the "Your task is to:" line."""
    for key in ("task", "instruction", "goal", "question"):
        value = inp.info.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    for text in (inp.first_observation, inp.observation):
        m = re.search(r"Your task is to:\s*(.+)", text or "")
        if m:
            return m.group(1).strip().splitlines()[0].rstrip(".") + "."
    return ""


def format_admissible(actions: Any, *, skip: tuple[str, ...] = ("help",)) -> str:
    """``'a', 'b', 'c'`` from a list of admissible actions (verl-agent drops ``help``)."""
    if not actions:
        return ""
    return ", ".join(f"'{a}'" for a in actions if str(a) not in skip)


def history_window(history_length: int, n: int) -> int:
    """How many of ``n`` past turns to show: ``history_length``, or all of them when it is negative."""
    return n if history_length < 0 else min(history_length, n)


def format_history(history: list[tuple[str, str]], history_length: int, *, start: int | None = None) -> str:
    """The last ``history_length`` (observation, action) pairs as numbered lines, verl-agent style.

    Numbers are absolute step indices (1-based), so the model can relate them to the step count.
    """
    k = history_window(history_length, len(history))
    if k <= 0:
        return ""
    recent = history[-k:]
    first = len(history) - len(recent) + 1 if start is None else start
    lines = [
        f"[Observation {first + i}: '{obs.strip()}', Action {first + i}: '{act}']"
        for i, (obs, act) in enumerate(recent)
    ]
    return "\n".join(lines)


class PromptTemplate:
    """Base class of all templates: ``build`` makes chat messages, ``parse`` reads the answer.

    Subclasses set :attr:`name`, :attr:`version`, :attr:`source` (the paper/code whose format they follow),
    :attr:`system_prompt` (None: no system message) and implement :meth:`user_prompt`.

    Attributes:
        require_think: parsing also requires ``<think>`` tags.
        reject_cjk: parsing rejects CJK ideographs.
        stop_strings: generation may stop once one of these is produced.
        lesson_heading: heading of the SEED lesson block inserted after the task sentence.
        reflection_heading: heading of the Reflexion/ERL reflection block placed before the current turn.
    """

    name: str = "base"
    version: str = "0"
    source: str = ""
    system_prompt: str | None = None
    require_think: bool = False
    reject_cjk: bool = False
    stop_strings: tuple[str, ...] = ("</action>",)
    lesson_heading: str = "Skills to use in this episode:"
    reflection_heading: str = "Reflections on your previous attempts at this task:"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, version={self.version!r})"

    @property
    def id(self) -> str:
        """``name@version``, stored in agent configs and logs."""
        return f"{self.name}@{self.version}"

    # -- pieces subclasses combine ------------------------------------------------------------------
    def lesson_block(self, lesson: str | None) -> str:
        return f"\n{self.lesson_heading}\n{lesson.strip()}\n" if lesson and lesson.strip() else ""

    def reflection_block(self, reflection: str | None) -> str:
        return f"\n{self.reflection_heading}\n{reflection.strip()}\n" if reflection and reflection.strip() else ""

    def user_prompt(
        self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None
    ) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- public API ---------------------------------------------------------------------------------
    def build(
        self,
        inp: AgentInput,
        *,
        history_length: int = 2,
        lesson: str | None = None,
        reflection: str | None = None,
        system: str | None = None,
    ) -> list[dict[str, str]]:
        """Chat messages for the current turn of ``inp``'s episode.

        Args:
            inp: the episode context (task, history, current observation, info).
            history_length: how many recent (observation, action) pairs to show (verl-agent: 2).
            lesson: SEED lesson text, inserted right after the task sentence under :attr:`lesson_heading`.
            reflection: Reflexion/ERL reflection text, placed before the current turn.
            system: replaces the template's system prompt (ERL's rulebook form).
        """
        messages: list[dict[str, str]] = []
        sys_text = system if system is not None else self.system_prompt
        if sys_text:
            messages.append({"role": "system", "content": sys_text})
        user = self.user_prompt(inp, history_length=history_length, lesson=lesson, reflection=reflection)
        messages.append({"role": "user", "content": user.strip()})
        return messages

    def format_answer(self, think: str, action: str) -> str:
        """An answer in this template's format that :meth:`parse` reads back as ``action`` (SFT targets)."""
        return f"<think>{think}</think> <action>{action}</action>"

    def parse(self, output: str) -> ParsedAction:
        """Parse a model answer (see :func:`parse_action`)."""
        return parse_action(output, require_think=self.require_think, reject_cjk=self.reject_cjk)

    def config(self) -> dict[str, Any]:
        return {"template": self.name, "template_version": self.version}
