"""agentgym envs in TRL's ``GRPOTrainer(environment_factory=...)`` (trl 1.16).

TRL's contract: a class with a no-argument ``__init__`` (one instance per rollout), ``reset(**row)`` that
receives the dataset row's columns and returns text appended to the prompt, ``get_reward()`` read once per
finished rollout, and every other public method offered to the model as a tool (typed arguments, Google
docstring). :func:`environment_factory` builds that class from the env family's tools
(:mod:`agentgym.integrations.tools`), so each tool call is one ``env.step`` of the env's own text action and
``get_reward`` is the episode's return as the env gave it. :func:`task_dataset` makes the rows: the seed and
task options of each episode, so train/held-out splits stay ours.

    from trl import GRPOConfig, GRPOTrainer
    from agentgym.integrations.trl import environment_factory, task_dataset

    trainer = GRPOTrainer(
        model="HuggingFaceTB/SmolLM2-135M-Instruct",
        train_dataset=task_dataset("agentgym/Sokoban-v0", seeds=range(1000)),
        environment_factory=environment_factory("agentgym/Sokoban-v0"),
        args=GRPOConfig(max_tool_calling_iterations=10),
    )
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable
from typing import Any

from agentgym.integrations.tools import Tool, ToolEnv, family


class AgentgymTRLEnv:
    """Base of the classes :func:`environment_factory` builds; its subclasses add one method per tool."""

    env_id: str = ""
    make_kwargs: dict[str, Any] = {}

    def __init__(self) -> None:
        self._tool_env = ToolEnv(self.env_id, **self.make_kwargs)

    def reset(self, seed: int | None = None, options: str | dict | None = None, **row: Any) -> str:
        """Start the row's episode (``seed`` and ``options`` columns; other columns are ignored)."""
        if isinstance(options, str):
            options = json.loads(options) if options else None
        return self._tool_env.reset(seed=None if seed is None else int(seed), options=options)

    def get_reward(self) -> float:
        """The episode's return: the sum of the env's rewards over the tool calls played."""
        return self._tool_env.total_reward


def _tool_method(tool: Tool):
    """A method ``name(self, <arg>: str) -> str`` with the Google docstring TRL/transformers read as the schema."""

    def method(self: AgentgymTRLEnv, *args: Any, **kwargs: Any) -> str:
        # catch-all: a model's wrong or extra arguments reach the env as an invalid tool call, not a crash
        if args:
            kwargs = {tool.arg: args[0], **kwargs} if len(args) == 1 else {"positional": list(args)}
        return self._tool_env.call(tool.name, kwargs)

    choices = f" (choices: {json.dumps(list(tool.choices))})" if tool.choices else ""
    method.__name__ = method.__qualname__ = tool.name
    method.__doc__ = (
        f"{tool.description}\n\nArgs:\n    {tool.arg}: {tool.arg_description}{choices}\n\n"
        "Returns:\n    The env's observation after the action."
    )
    method.__annotations__ = {tool.arg: str, "return": str}
    method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter(tool.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
        ],
        return_annotation=str,
    )
    return method


def environment_factory(env_id: str, **make_kwargs: Any) -> type[AgentgymTRLEnv]:
    """A class for ``GRPOTrainer(environment_factory=...)`` that plays ``env_id`` through its tools.

    Args:
        env_id: a registered ``agentgym/*`` id with a tool form (every family but the echo test env).
        **make_kwargs: passed to ``gym.make`` (e.g. ``split="valid_seen"`` for ALFWorld).

    Returns:
        A class whose instances TRL creates with no arguments; its public methods are the env's tools.
    """
    fam = family(env_id)
    name = env_id.split("/")[-1].split("-v")[0].replace(".", "") + "Env"
    namespace: dict[str, Any] = {t.name: _tool_method(t) for t in fam.tools}
    namespace.update(
        env_id=env_id,
        make_kwargs=dict(make_kwargs),
        __doc__=f"{env_id} through its tools ({', '.join(fam.names)}). {fam.instruction}",
    )
    return type(name, (AgentgymTRLEnv,), namespace)


def task_dataset(
    env_id: str,
    *,
    seeds: Iterable[int] | None = None,
    options: Iterable[dict[str, Any]] | None = None,
    instruction: str | None = None,
):
    """A ``datasets.Dataset`` of episodes for TRL: one row per task, ``reset`` reads its ``seed`` and ``options``.

    Args:
        env_id: the env the rows are for (its family gives the default instruction).
        seeds: the reset seed of each row (Sokoban/FrozenLake levels, or the draw of a data-backed task).
        options: the reset options of each row (``{"split": "test", "index": i}`` for WebShop/ALFWorld,
            ``{"index": i}`` for HotpotQA); zipped with ``seeds`` when both are given.
        instruction: the user message before the first observation (default: the family's instruction).

    Returns:
        A dataset with columns ``prompt`` (one user message), ``seed`` and ``options`` (JSON text, "" for none).
    """
    from datasets import Dataset

    fam = family(env_id)
    seeds, options = (list(seeds) if seeds is not None else None), (list(options) if options is not None else None)
    if seeds is None and options is None:
        raise ValueError("task_dataset needs seeds=..., options=... or both (one row per episode)")
    if seeds is not None and options is not None and len(seeds) != len(options):
        raise ValueError(f"seeds and options differ in length ({len(seeds)} and {len(options)})")
    n = len(seeds if seeds is not None else options)
    text = (instruction if instruction is not None else fam.instruction) + "\n\n"
    return Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": text}] for _ in range(n)],
            "seed": [int(s) for s in seeds] if seeds is not None else [None] * n,
            "options": [json.dumps(o) for o in options] if options is not None else [""] * n,
        }
    )
