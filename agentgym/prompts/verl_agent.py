"""verl-agent / GiGPO prompt format for ALFWorld and WebShop (and a generic fallback).

Format followed (langfengQ/verl-agent, ``agent_system/environments/prompts/alfworld.py`` and ``webshop.py``;
Feng et al., "Group-in-Group Policy Optimization for LLM Agent Training", 2025): one user message holding
the task sentence, the number of steps already taken, the last K observation/action pairs, the current
step and observation, the admissible actions, and the instruction to reason inside ``<think> </think>``
and answer inside ``<action> </action>``. The first turn (no history) omits the history lines, as their
``*_TEMPLATE_NO_HIS`` does. Parsing follows their projection: the answer needs both tag pairs and no CJK
characters. The prose is our paraphrase; the structure and the order of the parts are theirs.
"""

from __future__ import annotations

from agentgym.agent_io import AgentInput
from agentgym.prompts.base import PromptTemplate, extract_task, format_admissible, format_history, history_window

_ANSWER_RULES = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning MUST be enclosed "
    "within <think> </think> tags.\n"
    "Once you've finished your reasoning, choose an admissible action for the current step and present it "
    "within <action> </action> tags."
)


class VerlAgentTemplate(PromptTemplate):
    """Shared body of the verl-agent templates; subclasses set the role sentence."""

    role: str = "You are an expert agent operating in a text environment."
    require_think = True
    reject_cjk = True

    def current_observation(self, inp: AgentInput) -> str:
        return inp.observation.strip()

    def user_prompt(self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None) -> str:
        task = extract_task(inp)
        parts = [self.role + (f" Your task is to: {task}" if task else "")]
        block = self.lesson_block(lesson)
        if block:
            parts.append(block.strip("\n"))
        block = self.reflection_block(reflection)
        if block:
            parts.append(block.strip("\n"))
        n = inp.turn
        shown = history_window(history_length, n)
        if n > 0 and shown > 0:
            parts.append(
                f"Prior to this step, you have already taken {n} step(s). Below are the most recent {shown} "
                f"observations and the corresponding actions you took:\n{format_history(inp.history, shown)}"
            )
            parts.append(
                f"You are now at step {n + 1} and your current observation is: {self.current_observation(inp)}"
            )
        elif n > 0:
            parts.append(f"Prior to this step, you have already taken {n} step(s).")
            parts.append(
                f"You are now at step {n + 1} and your current observation is: {self.current_observation(inp)}"
            )
        else:
            parts.append(f"Your current observation is: {self.current_observation(inp)}")
        admissible = format_admissible(inp.info.get("admissible_actions"))
        if admissible:
            parts.append(f"Your admissible actions of the current situation are: [{admissible}].")
        parts.append("\n" + _ANSWER_RULES)
        return "\n".join(parts)


class ALFWorldTemplate(VerlAgentTemplate):
    """ALFWorld in the verl-agent/GiGPO format (the SAPO/GiGPO table's prompt)."""

    name = "alfworld-verl-agent"
    version = "1"
    source = "verl-agent agent_system/environments/prompts/alfworld.py (GiGPO, Feng et al. 2025)"
    role = "You are an expert agent operating in the ALFRED Embodied Environment."


class WebShopTemplate(VerlAgentTemplate):
    """WebShop in the verl-agent/GiGPO format: admissible actions are the page's clickables and search."""

    name = "webshop-verl-agent"
    version = "1"
    source = "verl-agent agent_system/environments/prompts/webshop.py (GiGPO, Feng et al. 2025)"
    role = "You are an expert autonomous agent operating in the WebShop e-commerce platform."


class GenericTemplate(VerlAgentTemplate):
    """Any text env in the verl-agent format (used for envs without a dedicated template)."""

    name = "generic-verl-agent"
    version = "1"
    source = "verl-agent prompt structure, env-agnostic wording"
    role = "You are an expert agent operating in a text-based environment."
    require_think = False
