"""Prompts for the grid puzzles (Sokoban, FrozenLake) in the RAGEN and ERL formats.

* ``ragen`` (default) follows RAGEN (Wang et al., "RAGEN: Understanding Self-Evolution in LLM Agents via
  Multi-Turn Reinforcement Learning", 2025; RAGEN-AI/RAGEN ``config/envs.yaml`` env instructions): a
  system line casting the model as a game player, the game rules, the symbol legend, then per turn
  ``Turn k: State: <grid>`` with the number of actions left, and the answer as ``<think>…</think>`` plus
  the move. RAGEN's answer tag is ``<answer>``; agentgym uses ``<action>`` in every template so one
  parser and one stop string serve all envs (recorded in the template version).
* ``erl`` follows ERL (Shi et al., "Experiential Reinforcement Learning", 2026, microsoft/experiential_rl):
  the board and the list of moves with no explanation of the rules or symbols -- the agent must learn
  them from experience (that is what ERL's reflections are for). Version 2 takes the authors' answer
  format (``ErlSokobanAgent``'s prompt): a ``<reason>…</reason>`` block (state, its value, the two best
  moves' consequences), then the move alone inside triple backticks (```` ```Up``` ````); the move is the
  text of the last backtick block. Version 1 asked for ``<think>…</think><action>…</action>``.
* ``erl-cells`` (ours) is ``erl`` with the board drawn one cell per token: each row labelled ``row k:`` and
  its cells separated by spaces. The env's observation is unchanged (scores stay comparable); only the
  agent's rendering differs. Byte-level BPE vocabularies merge runs of cells (SmolLM2 reads ``_P__`` as
  ``_`` ``P`` ``__``), so in the plain board a column is not a token position; with ``_ P _ _`` it is.

The prose is our paraphrase.
"""

from __future__ import annotations

import re

from agentgym.agent_io import AgentInput
from agentgym.prompts.base import ParsedAction, PromptTemplate, history_window

_RAGEN_SYSTEM = "You're a helpful assistant. You are a good game player, aiming to get high reward in the game."


def _moves(inp: AgentInput, default: tuple[str, ...]) -> list[str]:
    words = inp.info.get("action_words") or inp.info.get("admissible_actions") or default
    return [str(w) for w in words]


def _actions_left(inp: AgentInput, max_actions: int) -> int:
    left = inp.info.get("actions_left")
    return int(left) if isinstance(left, int) else max(0, max_actions - inp.turn)


class RagenGridTemplate(PromptTemplate):
    """Shared RAGEN body: rules + legend, then the recent turns and the current state."""

    system_prompt = _RAGEN_SYSTEM
    rules: str = ""
    default_moves: tuple[str, ...] = ("Up", "Down", "Left", "Right")
    max_actions: int = 10

    def user_prompt(self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None) -> str:
        moves = _moves(inp, self.default_moves)
        parts = [self.rules.strip()]
        parts.append(self.lesson_block(lesson).strip("\n"))
        parts.append(self.reflection_block(reflection).strip("\n"))
        n = inp.turn
        k = history_window(history_length, len(inp.history))
        shown = inp.history[len(inp.history) - k :]
        first = n - len(shown) + 1
        for i, (obs, act) in enumerate(shown):
            parts.append(f"Turn {first + i}:\nState:\n{obs.strip()}\nYour move: {act}")
        parts.append(f"Turn {n + 1}:\nState:\n{inp.observation.strip()}")
        parts.append(
            f"You have {_actions_left(inp, self.max_actions)} actions left. Valid moves: {', '.join(moves)}.\n"
            "Always answer as <think> [your thoughts] </think> <action> [one move] </action> with no extra text. "
            "Keep your answer under 100 words."
        )
        return "\n".join(p for p in parts if p)


class SokobanTemplate(RagenGridTemplate):
    """Sokoban, RAGEN format (rules and the ``# _ O X √ P S`` legend)."""

    name = "sokoban-ragen"
    version = "1"
    source = "RAGEN-AI/RAGEN config/envs.yaml (Sokoban instruction); Wang et al. 2025"
    rules = (
        "You are solving the Sokoban puzzle. You are the player and must push every box onto a target. "
        "When you stand right next to a box you push it by moving in its direction. Boxes cannot be pushed "
        "through walls and cannot be pulled.\n"
        "Symbols: # wall, _ floor, O target, X box, √ box on target, P player, S player on target."
    )


class FrozenLakeTemplate(RagenGridTemplate):
    """FrozenLake, RAGEN format (rules, slipperiness warning and the ``P _ O G X √`` legend)."""

    name = "frozenlake-ragen"
    version = "1"
    source = "RAGEN-AI/RAGEN config/envs.yaml (FrozenLake instruction); Wang et al. 2025"
    default_moves = ("Left", "Down", "Right", "Up")
    rules = (
        "You are solving the FrozenLake puzzle. Avoid the holes and walk to the goal. The ice is slippery: "
        "you may move in an unintended direction.\n"
        "Symbols: P player, _ frozen tile, O hole, G goal, X player fell into a hole, √ player on the goal."
    )


_REASON_RE = re.compile(r"<reason>(.*?)</reason>", re.DOTALL | re.IGNORECASE)
_BACKTICK_RE = re.compile(r"```([^`]*)```")


class ErlGridTemplate(PromptTemplate):
    """ERL format: the board and the legal moves, no rules and no legend; the authors' answer format."""

    stop_strings: tuple[str, ...] = ()  # the answer ends with a closing ``` that an opening one would match

    game: str = "a grid game"
    default_moves: tuple[str, ...] = ("up", "down", "left", "right")

    #: draw the board one cell per token (``row k: _ P _ _``) instead of the env's text (``_P__``)
    cells: bool = False

    def board(self, text: str) -> str:
        """The board as shown in the prompt: the env's text, or with :attr:`cells` one labelled row per line."""
        rows = text.strip().split("\n")
        if not self.cells:
            return "\n".join(rows)
        return "\n".join(f"row {k}: " + " ".join(row.strip()) for k, row in enumerate(rows, 1))

    def user_prompt(self, inp: AgentInput, *, history_length: int, lesson: str | None, reflection: str | None) -> str:
        moves = _moves(inp, self.default_moves)
        parts = [f"You are playing {self.game}."]
        parts.append(self.lesson_block(lesson).strip("\n"))
        parts.append(self.reflection_block(reflection).strip("\n"))
        k = history_window(history_length, len(inp.history))
        shown = inp.history[len(inp.history) - k :]
        if shown:
            parts.append("Recent moves:")
            parts += [f"{self.board(obs)}\nmove: {act}" for obs, act in shown]
        parts.append(f"Current board:\n{self.board(inp.observation)}")
        parts.append(
            f"Available moves: {', '.join(moves)}.\n"
            "Reason first inside <reason> </reason>: sum up the board, judge how promising it is, and say "
            "what the two best candidate moves would lead to. Then write only the next move inside triple "
            f"backticks as the last line, for example ```{moves[0] if moves else 'Up'}```."
        )
        return "\n".join(p for p in parts if p)

    def format_answer(self, think: str, action: str) -> str:
        """``<reason>think</reason>`` then the move alone in triple backticks on the last line."""
        return f"<reason>{think}</reason>\n```{action}```"

    def parse(self, output: str) -> ParsedAction:
        """The move is the text of the last triple-backtick block; ``think`` is the last ``<reason>`` block."""
        text = output or ""
        reasons = _REASON_RE.findall(text)
        think = reasons[-1].strip() if reasons else None
        blocks = _BACKTICK_RE.findall(text)
        if not blocks:
            return ParsedAction(action="", valid=False, reason="missing ```move``` block", think=think)
        action = blocks[-1].strip()
        if not action:
            return ParsedAction(action="", valid=False, reason="empty ``` ``` block", think=think)
        return ParsedAction(action=action, valid=True, think=think)


class SokobanErlTemplate(ErlGridTemplate):
    name = "sokoban-erl"
    version = "2"
    source = "microsoft/experiential_rl Sokoban prompt (Shi et al. 2026): board and moves, no rules"
    game = "Sokoban"


class FrozenLakeErlTemplate(ErlGridTemplate):
    name = "frozenlake-erl"
    version = "2"
    source = "microsoft/experiential_rl FrozenLake prompt (Shi et al. 2026): board and moves, no rules"
    game = "FrozenLake"


class SokobanErlCellsTemplate(SokobanErlTemplate):
    name = "sokoban-erl-cells"
    version = "1"
    source = "ours: the ERL Sokoban prompt with the board one cell per token (row labels, spaced cells)"
    cells = True


class FrozenLakeErlCellsTemplate(FrozenLakeErlTemplate):
    name = "frozenlake-erl-cells"
    version = "1"
    source = "ours: the ERL FrozenLake prompt with the board one cell per token (row labels, spaced cells)"
    cells = True
