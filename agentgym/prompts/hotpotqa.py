"""ReAct-style prompt for HotpotQA.

Format followed: ReAct (Yao et al., "ReAct: Synergizing Reasoning and Acting in Language Models", ICLR 2023;
ysymyth/ReAct ``hotpotqa.ipynb``): interleaved Thought / Action / Observation steps with the three actions
``search[entity]``, ``lookup[keyword]`` and ``finish[answer]``, the whole trajectory so far in the prompt.
Here the thought goes inside ``<think>`` and the action inside ``<action>`` (one parser for all envs).
The instructions are our paraphrase; no few-shot examples are included (agentgym's zero-shot protocol).
"""

from __future__ import annotations

from agentgym.agent_io import AgentInput
from agentgym.prompts.base import PromptTemplate, extract_task

_INSTRUCTIONS = (
    "Answer a question by interleaving Thought, Action and Observation steps. A thought reasons about the "
    "current situation. An action is one of:\n"
    "(1) search[entity]: look up the entity's Wikipedia paragraph; if it does not exist, similar titles are shown.\n"
    "(2) lookup[keyword]: show the next sentence containing keyword in the current paragraph.\n"
    "(3) finish[answer]: give the answer and end the task."
)


class HotpotQATemplate(PromptTemplate):
    """HotpotQA with ReAct's action set; the history shows every past step (ReAct keeps the trajectory)."""

    name = "hotpotqa-react"
    version = "1"
    source = "ysymyth/ReAct hotpotqa prompt format (Yao et al. 2023)"

    def user_prompt(self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None) -> str:
        question = extract_task(inp) or inp.first_observation.strip()
        parts = [_INSTRUCTIONS, f"Question: {question}"]
        parts.append(self.lesson_block(lesson).strip("\n"))
        parts.append(self.reflection_block(reflection).strip("\n"))
        # ReAct shows the whole trajectory; history_length < 0 means "all", a positive value caps it.
        steps = list(inp.history[1:]) + [(inp.observation, "")] if inp.history else []
        acts = [a for _, a in inp.history]
        obs_after = [o for o, _ in steps]
        pairs = list(zip(acts, obs_after))
        if history_length >= 0:
            pairs = pairs[-max(history_length, 0) :] if history_length else []
        first = len(acts) - len(pairs) + 1
        for i, (act, obs) in enumerate(pairs):
            parts.append(f"Action {first + i}: {act}\nObservation {first + i}: {obs.strip()}")
        if not inp.history:
            parts.append(f"Observation: {inp.observation.strip()}")
        parts.append(
            f"Step {inp.turn + 1}: write your thought inside <think> </think>, then one action inside "
            "<action> </action>, e.g. <action>search[Arthur's Magazine]</action>."
        )
        return "\n".join(p for p in parts if p)
