"""The prompt settings a trained model folder was trained with: ``agentgym_prompt.json`` beside its weights.

A model trained with one prompt (template style, history window, response cap) plays another one badly: the
same SmolLM2 FrozenLake model scores 0 evaluated with the default template and history, and its real score
with the settings it was trained on. The trainers (RL and SFT) write this file when they export a model
folder; ``agentgym eval --agent hf:<folder>`` and a leaderboard rerun read it and use its values wherever the
command line or the submission sets none, and say so in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The file name, in the model folder next to ``config.json``.
PROMPT_FILE = "agentgym_prompt.json"

#: The agent settings the file supplies (``agentgym.agents.LLMAgent`` keyword names).
AGENT_KEYS = ("style", "history_length", "max_new_tokens")


def write_prompt_settings(
    folder: str | Path,
    *,
    env_id: str,
    style: str | None,
    template: str,
    history_length: int,
    max_new_tokens: int,
    max_prompt_tokens: int,
    answer_format: str,
    trained_by: str,
) -> Path:
    """Write ``folder/agentgym_prompt.json``.

    Args:
        folder: the exported model folder.
        env_id: the env the model was trained on.
        style: the template style (``prompt_style``; None: the env's default).
        template: the template's ``name@version``.
        history_length: past turns shown in the prompt.
        max_new_tokens: response length cap.
        max_prompt_tokens: prompt length cap.
        answer_format: an example answer in the template's format (what the parser expects).
        trained_by: the trainer (``sft``, ``gigpo``, ...).
    """
    path = Path(folder) / PROMPT_FILE
    settings = {
        "env_id": env_id,
        "style": style,
        "template": template,
        "history_length": int(history_length),
        "max_new_tokens": int(max_new_tokens),
        "max_prompt_tokens": int(max_prompt_tokens),
        "answer_format": answer_format,
        "trained_by": trained_by,
    }
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def read_prompt_settings(folder: str | Path) -> dict[str, Any] | None:
    """The settings in ``folder/agentgym_prompt.json``; None when the folder has none (a hub id, a base model).

    Raises:
        ValueError: the file is there but is not a JSON object.
    """
    path = Path(folder) / PROMPT_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path} is not valid JSON ({exc}); delete it or rewrite it by re-exporting the model"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object of prompt settings")
    return data


def agent_defaults(folder: str | Path, given: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The agent settings of ``folder``'s file that ``given`` does not set, and a one-line note saying so.

    Args:
        folder: the model folder.
        given: the settings already chosen (None values count as unset).

    Returns:
        ``(settings to add, note)``; ``({}, None)`` when the folder has no file or everything was given.
    """
    saved = read_prompt_settings(folder)
    if not saved:
        return {}, None
    add = {k: saved[k] for k in AGENT_KEYS if saved.get(k) is not None and given.get(k) is None}
    if not add:
        return {}, None
    shown = ", ".join(f"{k} {v}" for k, v in add.items())
    note = f"{folder}: using the prompt settings it was trained with ({shown}; from {PROMPT_FILE}, flags override)"
    return add, note
