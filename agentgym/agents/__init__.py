"""Agents: the protocol, scripted agents (random, expert) and LLM agents.

:func:`from_spec` builds the model agents from command-line specs (``agentgym eval --agent SPEC``):

* ``hf:ID_OR_PATH`` -- :class:`LLMAgent` over transformers (``hf:smollm2`` = the offline SmolLM2-135M);
  ``hf:ID@REVISION`` loads the hub model at that commit (or pass ``revision=``; ``checkpoint_sha256=`` pins
  a local folder's files, see :func:`agentgym.models.loading.checkpoint_sha256`).
* ``openai:MODEL`` -- :class:`OpenAIAgent` (``--base-url URL`` for vLLM, TGI or ``agentgym.models.serve``).
* ``react:hf:ID`` / ``react:openai:MODEL`` (``react:ID`` means ``react:hf:ID``) -- :class:`ReActAgent`.
* ``reflexion:...`` -- :class:`ReflexionAgent` (same back-end forms).
"""

from __future__ import annotations

from typing import Any

from agentgym.agents.base import (
    Agent,
    AgentAction,
    AgentInput,
    ExpertAgent,
    NoisyExpertAgent,
    RandomAgent,
    ScriptedAgent,
    agent_config,
)

_LLM_KWARGS = ("temperature", "top_p", "max_new_tokens", "history_length", "style", "name")


def model_target(spec: str) -> tuple[str, str, str | None] | None:
    """The model a model-agent spec names: ``(backend, model, revision)``; None for other specs.

    ``backend`` is ``"hf"`` or ``"openai"``; ``revision`` is what follows the last ``@`` of an ``hf`` model
    (``hf:Qwen/Qwen2.5-1.5B-Instruct@989aa79...``), else None. ``react:ID`` means ``react:hf:ID``.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("hf", "openai", "react", "reflexion"):
        return None
    if kind in ("react", "reflexion"):
        inner, sep2, target = rest.partition(":")
        kind, rest = (inner, target) if sep2 and inner in ("hf", "openai") else ("hf", rest)
    if kind == "openai":
        return "openai", rest, None
    model, at, revision = rest.rpartition("@")
    if at and model and revision and "/" not in revision:
        return "hf", model, revision
    return "hf", rest, None


def _backend(spec: str, kwargs: dict[str, Any]) -> Any:
    from agentgym.agents.llm import HFChat
    from agentgym.agents.openai_agent import OpenAIChat

    kind, model, revision = model_target(spec) or ("hf", "", None)
    if not model:
        raise SystemExit("agent spec needs a model: hf:ID_OR_PATH or openai:MODEL")
    if kind == "openai":
        return OpenAIChat(model, base_url=kwargs.get("base_url"), api_key=kwargs.get("api_key"))
    if revision and kwargs.get("revision") and kwargs["revision"] != revision:
        raise ValueError(f"{spec}: the spec pins revision {revision} but revision={kwargs['revision']!r} was passed")
    return HFChat(
        kwargs.get("model_path") or model,  # model_path: the same checkpoint, copied to another folder
        device=kwargs.get("device"),
        dtype=kwargs.get("dtype"),
        revision=revision or kwargs.get("revision"),
        checkpoint_sha256=kwargs.get("checkpoint_sha256"),
    )


def _trained_prompt(spec: str, kwargs: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """A local model folder's recorded prompt settings that ``given`` leaves unset (printed in one line)."""
    import sys
    from pathlib import Path

    from agentgym.models.prompt_settings import agent_defaults

    _, model, _ = model_target(spec) or ("hf", "", None)
    folder = kwargs.get("model_path") or model
    if not folder or not Path(folder).is_dir():
        return {}
    add, note = agent_defaults(folder, given)
    if note:
        print(note, file=sys.stderr, flush=True)
    return add


def from_spec(spec: str, **kwargs: Any) -> Agent | None:
    """Build a model agent from ``spec``; None for specs this module does not know.

    Args:
        spec: ``hf:...``, ``openai:...``, ``react:...`` or ``reflexion:...`` (see the module docstring).
        **kwargs: ``seed``, ``base_url``, ``api_key``, ``device``, ``dtype``, the model pins ``revision`` and
            ``checkpoint_sha256`` (see :func:`agentgym.models.loading.load_model`), ``model_path`` (load the
            spec's checkpoint from this folder instead, e.g. a copy on another machine) and :class:`LLMAgent`
            settings (``temperature``, ``top_p``, ``max_new_tokens``, ``history_length``, ``style``); None
            values are ignored, unknown keys too (the CLI passes what it has). An ``hf:FOLDER`` model trained
            here supplies the prompt settings it was trained with (``agentgym_prompt.json``) that are not given.

    Raises:
        agentgym.models.loading.ModelPinError: the weights found are not the pinned ones.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in ("hf", "openai", "react", "reflexion"):
        return None
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    agent_kw = {k: kwargs[k] for k in _LLM_KWARGS if k in kwargs}
    if "seed" in kwargs:
        agent_kw["seed"] = kwargs["seed"]
    if kind == "hf":
        from agentgym.agents.llm import LLMAgent

        agent_kw.update(_trained_prompt(spec, kwargs, agent_kw))
        return LLMAgent(_backend(spec, kwargs), **{"name": spec, **agent_kw})
    if kind == "openai":
        from agentgym.agents.openai_agent import OpenAIAgent

        if not rest:
            raise SystemExit("openai agent spec needs a model name: openai:MODEL")
        return OpenAIAgent(rest, base_url=kwargs.get("base_url"), api_key=kwargs.get("api_key"), **agent_kw)
    if kind == "react":
        from agentgym.agents.react import ReActAgent

        return ReActAgent(_backend(spec, kwargs), **{"name": spec, **agent_kw})
    from agentgym.agents.reflexion import ReflexionAgent

    return ReflexionAgent(_backend(spec, kwargs), **{"name": spec, **agent_kw})


def __getattr__(name: str) -> Any:
    # The LLM agents import torch/transformers/openai lazily: `import agentgym.agents` stays light.
    if name in ("LLMAgent", "HFChat", "ChatResult"):
        from agentgym.agents import llm

        return getattr(llm, name)
    if name in ("OpenAIAgent", "OpenAIChat"):
        from agentgym.agents import openai_agent

        return getattr(openai_agent, name)
    if name == "ReActAgent":
        from agentgym.agents.react import ReActAgent

        return ReActAgent
    if name == "ReflexionAgent":
        from agentgym.agents.reflexion import ReflexionAgent

        return ReflexionAgent
    raise AttributeError(f"module 'agentgym.agents' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentAction",
    "AgentInput",
    "ExpertAgent",
    "HFChat",
    "LLMAgent",
    "NoisyExpertAgent",
    "OpenAIAgent",
    "OpenAIChat",
    "RandomAgent",
    "ScriptedAgent",
    "ReActAgent",
    "ReflexionAgent",
    "agent_config",
    "from_spec",
    "model_target",
]
