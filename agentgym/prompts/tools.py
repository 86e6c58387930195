"""Every env family as named tools with typed arguments, and OpenAI ``tools`` schemas from the same table.

A tool call maps one-to-one onto the env's own text action (``move(direction="up")`` is the action ``up``,
``search(query="red shirt")`` on WebShop is ``search[red shirt]``), so rewards, success and invalid-action
handling are the env's: nothing here scores anything. The tool-calling agent (``agentgym eval --tool-calls``)
and the trainer integrations (:mod:`agentgym.integrations`) read this one table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class Tool:
    """One tool: a name, one string argument and the text action it stands for.

    Attributes:
        name: the tool's name (a Python identifier).
        description: what the tool does, shown to the model.
        arg: the argument's name.
        arg_description: what the argument means.
        template: the env action, with ``{}`` where the argument goes (``"search[{}]"``; ``"{}"`` passes it as is).
        choices: the argument's allowed values, or None for free text.
    """

    name: str
    description: str
    arg: str
    arg_description: str
    template: str = "{}"
    choices: tuple[str, ...] | None = None

    def action(self, value: str) -> str:
        """The env's text action for this tool called with ``value``."""
        return self.template.format(value)

    def openai_schema(self) -> dict[str, Any]:
        """This tool in the OpenAI ``tools`` format (``{"type": "function", "function": {...}}``)."""
        prop: dict[str, Any] = {"type": "string", "description": self.arg_description}
        if self.choices is not None:
            prop["enum"] = list(self.choices)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": {self.arg: prop}, "required": [self.arg]},
            },
        }


@dataclass(frozen=True)
class Family:
    """The tools of one env family, and the one-line instruction that tells a model how to use them."""

    name: str
    tools: tuple[Tool, ...]
    instruction: str
    #: Append ``info["admissible_actions"]`` to each observation (ALFWorld: the model picks among them).
    show_admissible: bool = False

    def tool(self, name: str) -> Tool:
        for t in self.tools:
            if t.name == name:
                return t
        raise ToolCallError(f"unknown tool {name!r} for {self.name}; the tools are: {', '.join(self.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)


class ToolCallError(ValueError):
    """A tool call that names no tool of the env, or lacks or mistypes its argument."""


_GRID_MOVE = "Move the player one square in a direction. Returns the new board."
FAMILIES: dict[str, Family] = {
    "sokoban": Family(
        "sokoban",
        (
            Tool(
                "move",
                _GRID_MOVE + " Walking into a box pushes it.",
                "direction",
                "where to move",
                choices=("up", "down", "left", "right"),
            ),
        ),
        "Push every box (X) onto a target (O). Call the move tool once per move.",
    ),
    "frozen_lake": Family(
        "frozen_lake",
        (
            Tool(
                "move",
                _GRID_MOVE + " The ice is slippery: a move may slide sideways.",
                "direction",
                "where to move",
                choices=("left", "down", "right", "up"),
            ),
        ),
        "Walk from P to the goal G without falling into a hole O. Call the move tool once per move.",
    ),
    "webshop": Family(
        "webshop",
        (
            Tool(
                "search",
                "Search the shop from any page. Returns the results page.",
                "query",
                "the search keywords",
                template="search[{}]",
            ),
            Tool(
                "click",
                "Click a button or link shown on the current page (a product id, an option, "
                "'buy now', 'back to search', 'next >'). Returns the new page.",
                "button",
                "the label of the clickable element, as shown",
                template="click[{}]",
            ),
        ),
        "Buy the product the instruction describes, with its options, by searching and clicking.",
    ),
    "hotpotqa": Family(
        "hotpotqa",
        (
            Tool(
                "search",
                "Look up a Wikipedia paragraph by its title. Returns its first sentences, or "
                "similar titles when none matches.",
                "entity",
                "the title to look up",
                template="search[{}]",
            ),
            Tool(
                "lookup",
                "Find the next sentence containing a keyword in the last paragraph found.",
                "keyword",
                "the word or phrase to find",
                template="lookup[{}]",
            ),
            Tool(
                "finish", "Submit the final answer and end the episode.", "answer", "the answer", template="finish[{}]"
            ),
        ),
        "Answer the question: search for paragraphs, look up keywords, then call finish with the answer.",
    ),
    "alfworld": Family(
        "alfworld",
        (
            Tool(
                "act",
                "Do one thing in the household, e.g. 'go to desk 1', 'take mug 1 from desk 1'. "
                "Returns what happened and the commands admissible next.",
                "command",
                "one of the admissible commands",
            ),
        ),
        "Complete the household task by calling act with one admissible command at a time.",
        show_admissible=True,
    ),
}


def family(env_id: str) -> Family:
    """The tool family of a registered ``agentgym/*`` id (``gym.spec``'s entry point says which env it plays)."""
    try:
        entry = str(gym.spec(env_id).entry_point)
    except gym.error.Error as exc:
        raise ToolCallError(f"{env_id!r} is not a registered env id (see `agentgym list`)") from exc
    module = entry.partition(":")[0]
    parts = module.split(".")
    # the family is the env's module under agentgym.envs (agentgym.envs.webshop.browser is webshop too)
    if len(parts) >= 3 and parts[:2] == ["agentgym", "envs"] and parts[2] in FAMILIES:
        return FAMILIES[parts[2]]
    raise ToolCallError(f"{env_id} has no tool form; families with one: {', '.join(sorted(FAMILIES))}")


def openai_tools(env_id: str) -> list[dict[str, Any]]:
    """The env's tools in the OpenAI chat-completions ``tools`` format."""
    return [t.openai_schema() for t in family(env_id).tools]


def to_action(env_id: str | Family, name: str, arguments: dict[str, Any] | str) -> str:
    """The env text action a tool call stands for. ``arguments`` may be the JSON string an API returns.

    Raises:
        ToolCallError: unknown tool, arguments that are not a JSON object, or a missing/non-string argument.
    """
    fam = env_id if isinstance(env_id, Family) else family(env_id)
    tool = fam.tool(name)
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolCallError(f"{name}: arguments are not valid JSON ({exc.msg})") from exc
    if not isinstance(arguments, dict):
        raise ToolCallError(f"{name}: arguments must be a JSON object, got {type(arguments).__name__}")
    value = arguments.get(tool.arg)
    if not isinstance(value, str):
        raise ToolCallError(f"{name} needs a string argument {tool.arg!r}, got {arguments!r}")
    return tool.action(value)


_BRACKET = re.compile(r"^\s*(\w+)\[(.*)\]\s*$", re.DOTALL)
_BOXED = re.compile(r"\\boxed\{(.*)\}", re.DOTALL)


def to_tool_call(env_id: str | Family, action: str) -> tuple[str, dict[str, str]]:
    """The tool call that stands for a text action (the inverse of :func:`to_action`), e.g. for an expert's moves.

    Raises:
        ToolCallError: the action has no tool form (a bracket verb that is no tool of the family).
    """
    fam = env_id if isinstance(env_id, Family) else family(env_id)
    bracketed = [t for t in fam.tools if t.template != "{}"]
    if not bracketed:
        tool = fam.tools[0]
        return tool.name, {tool.arg: action}
    m = _BRACKET.match(action)
    if m is None:
        boxed = _BOXED.search(action)
        if boxed is not None and "finish" in fam.names:  # ERL-style answers submit like finish[...]
            return "finish", {"answer": boxed.group(1)}
        raise ToolCallError(f"{action!r} is no {fam.name} tool call ({', '.join(fam.names)})")
    verb, arg = m.group(1).lower(), m.group(2)
    tool = fam.tool(verb)
    return tool.name, {tool.arg: arg}
