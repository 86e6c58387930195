"""Reflexion as a prompting baseline (Shinn et al., "Reflexion: Language Agents with Verbal Reinforcement
Learning", NeurIPS 2023).

After a failed trial, the agent writes a short self-reflection on the trajectory (what went wrong and a
new plan) and keeps it in an episodic memory (the last ``max_reflections``, 3 in the paper). The next
trial of the *same task* sees those reflections in its prompt, placed before the current turn (the
template's ``reflection`` block). :func:`agentgym.evaluation.run_reflexion` runs the trials: trial k+1 replays the tasks
still unsolved after trial k, and the reported success is "solved within k trials", as in the paper.

Reflections are written in one batched call per trial (the agent holds the failed episodes until its
next ``act``), not one call per episode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agentgym.agent_io import AgentAction, AgentInput
from agentgym.agents.llm import LLMAgent
from agentgym.episodes import Episode

REFLECTION_VERSION = "reflexion-v1"

_REFLECT_SYSTEM = "You are an agent that learns from its mistakes by reflecting on them."
_REFLECT_INSTRUCTIONS = (
    "Below is the record of an earlier attempt in which you were given a task in an environment and did not "
    "complete it. Do not describe the environment. Think about the strategy and the actions you took, find the "
    "mistake, and write a short new plan that avoids it, naming the specific actions you should have taken. "
    "Answer in at most three sentences, inside <reflection> </reflection> tags."
)


def task_key(env_id: str, task_id: Any, first_observation: str) -> str:
    """Which memory a trial uses: the env and its task id (or, without one, the first observation)."""
    return f"{env_id}|{task_id}" if task_id not in (None, "") else f"{env_id}|obs:{first_observation}"


def trajectory_text(episode: Episode, max_chars: int = 4000) -> str:
    """The episode as observation/action lines, clipped in the middle to ``max_chars``."""
    lines = [f"Task start: {episode.reset_observation.strip()}"]
    for step in episode.steps:
        lines.append(f"> {step.action}")
        lines.append(step.observation.strip())
    text = "\n".join(lines)
    if len(text) > max_chars:
        half = max_chars // 2
        text = text[:half] + "\n[...]\n" + text[-half:]
    outcome = "succeeded" if episode.success else "failed"
    return f"{text}\nOutcome: the attempt {outcome} after {episode.length} step(s) (return {episode.total_return:g})."


def reflection_messages(episode: Episode) -> list[dict[str, str]]:
    """The chat that asks for a reflection on a failed episode."""
    return [
        {"role": "system", "content": _REFLECT_SYSTEM},
        {"role": "user", "content": f"{_REFLECT_INSTRUCTIONS}\n\n{trajectory_text(episode)}"},
    ]


def parse_reflection(text: str) -> str:
    """The last ``<reflection>`` block, else the text without ``<think>`` blocks (never empty)."""
    blocks = re.findall(r"<reflection>(.*?)(?:</reflection>|$)", text or "", re.S | re.I)
    out = blocks[-1].strip() if blocks else re.sub(r"<think>.*?(</think>|$)", "", text or "", flags=re.S).strip()
    return out or "The previous attempt failed; try a different sequence of actions."


class ReflexionAgent(LLMAgent):
    """:class:`LLMAgent` with Reflexion's episodic memory of self-reflections.

    Args:
        backend: chat back-end or model id/path.
        max_reflections: reflections kept per task (the paper: 3).
        reflection_max_tokens: length cap of one reflection.
        **kwargs: :class:`LLMAgent` settings.
    """

    def __init__(self, backend: Any, *, max_reflections: int = 3, reflection_max_tokens: int = 256, **kwargs: Any):
        super().__init__(backend, **kwargs)
        if not kwargs.get("name"):
            self.name = "reflexion:" + self.name.split(":", 1)[-1]
        self.max_reflections = max_reflections
        self.reflection_max_tokens = reflection_max_tokens
        self.memory: dict[str, list[str]] = {}
        self.pending: list[Episode] = []

    def config(self) -> dict[str, Any]:
        return {
            **super().config(),
            "method": "reflexion",
            "max_reflections": self.max_reflections,
            "reflection_version": REFLECTION_VERSION,
        }

    def reflections_for(self, inp: AgentInput) -> list[str]:
        return self.memory.get(task_key(inp.env_id, inp.task_id, inp.first_observation), [])

    def build_kwargs(self, inp: AgentInput) -> dict[str, Any]:
        notes = self.reflections_for(inp)
        if not notes:
            return {}
        return {"reflection": "\n".join(f"Trial {i + 1}: {r}" for i, r in enumerate(notes))}

    def on_episode_end(self, episode: Episode) -> None:
        """Queue a failed episode for reflection (written in one batch before the next ``act``)."""
        if not episode.success:
            self.pending.append(episode)

    def reflect(self) -> list[str]:
        """Write the reflections of all queued failed episodes (one batched completion) into memory."""
        episodes, self.pending = self.pending, []
        if not episodes:
            return []
        results = self.backend.complete(
            [reflection_messages(ep) for ep in episodes],
            max_new_tokens=self.reflection_max_tokens,
            temperature=0.0,
            top_p=1.0,
            stop=["</reflection>"],
            seed=self.seed,
        )
        texts = []
        for ep, res in zip(episodes, results):
            text = parse_reflection(res.text)
            key = task_key(ep.env_id, ep.task_id, ep.reset_observation)
            notes = self.memory.setdefault(key, [])
            notes.append(text)
            del notes[: -self.max_reflections]
            ep.extras["reflection"] = text
            texts.append(text)
        return texts

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        self.reflect()
        return super().act(inputs)
