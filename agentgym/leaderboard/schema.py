"""The submission format: a JSON Schema for ``submission.json`` and a validator with readable messages.

A submission is a folder (or a .zip / .tar / .tar.gz of one)::

    submission.json              metadata, runnable agent spec, suite, env versions, claimed results, logs
    episodes/<Env-vN>.jsonl.gz   the episode logs (one agentgym.episodes.Episode per line)

``agent.runnable`` says how to run the agent again (``agentgym leaderboard verify --rerun``): either a
pinned spec (``spec`` as ``agentgym eval --agent`` takes it, ``kwargs``, the model pinned by revision or
checkpoint sha256, prompt version, sampling parameters) or ``{"logs_only": true, "reason": ...}``. Both
name ``agent_name``, the label every episode of the logs must carry. :func:`runnable_errors` says what a
spec lacks to be pinned.

``leaderboards/schema/submission.schema.json`` is :data:`SUBMISSION_SCHEMA` written out by
``agentgym leaderboard build``; this module is the source of truth.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

#: Layout version of submission.json; bump on incompatible changes.
SCHEMA_VERSION = 1

#: Method types the board filters on.
METHOD_TYPES: tuple[str, ...] = ("Prompting", "RL", "SFT", "RL+SFT", "Scripted", "Other")

#: Agent specs that run without a model (nothing to pin but their kwargs).
SCRIPTED_SPECS: tuple[str, ...] = ("random", "expert")
#: Spec prefixes of model agents (see ``agentgym.agents.from_spec``): they need a pinned model and sampling.
MODEL_PREFIXES: tuple[str, ...] = ("hf:", "openai:", "react:", "reflexion:")

_HEX64 = "^[0-9a-f]{64}$"
#: A hub commit (what ``model.revision`` must be: a branch or tag can move).
COMMIT = "[0-9a-f]{40}"

RUNNABLE_SCHEMA: dict[str, Any] = {
    "description": "how to run the agent again; or logs_only with the reason it cannot be",
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["logs_only", "reason", "agent_name"],
            "properties": {
                "logs_only": {"const": True},
                "reason": {"type": "string", "minLength": 1, "maxLength": 500},
                "agent_name": {"type": "string", "minLength": 1, "maxLength": 200},
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["spec", "kwargs", "agent_name"],
            "properties": {
                "spec": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 300,
                    "description": "random | expert | module:Class | hf:ID | openai:MODEL | react:... | reflexion:...",
                },
                "kwargs": {"type": "object", "maxProperties": 64, "description": "constructor / from_spec kwargs"},
                "agent_name": {"type": "string", "minLength": 1, "maxLength": 200},
                "code_sha256": {"type": "string", "pattern": _HEX64, "description": "module:Class: its source file"},
                "model": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "id": {"type": "string", "maxLength": 200},
                        "revision": {"type": "string", "minLength": 1, "maxLength": 100},
                        "checkpoint_sha256": {"type": "string", "pattern": _HEX64},
                    },
                },
                "prompt_version": {"type": "string", "maxLength": 50},
                "sampling": {"type": "object", "maxProperties": 16, "additionalProperties": {"type": "number"}},
            },
        },
    ],
}

_RESULT_COLUMNS = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": 32,
    "additionalProperties": {"type": "number"},
}

SUBMISSION_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:agentgym:leaderboard:submission-schema",
    "title": "agentgym leaderboard submission",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "agent", "suite", "agentgym_version", "envs", "results", "episodes"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "agent": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "model", "method", "method_type", "date", "verified", "runnable"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 100, "description": "display name"},
                "model": {"type": "string", "minLength": 1, "maxLength": 200, "description": "base model id"},
                "model_size_b": {
                    "type": ["number", "null"],
                    "minimum": 0,
                    "description": "model parameters in billions (null: unknown / closed)",
                },
                "method": {"type": "string", "minLength": 1, "maxLength": 100, "description": "e.g. GRPO, ReAct"},
                "method_type": {"enum": list(METHOD_TYPES)},
                "parameters": {
                    "type": "object",
                    "maxProperties": 64,
                    "description": "settings that produced the run (temperature, checkpoint, ...)",
                },
                "code": {"type": "string", "maxLength": 500, "description": "link to the code"},
                "paper": {"type": "string", "maxLength": 500},
                "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
                "contact": {"type": "string", "maxLength": 200},
                "description": {"type": "string", "maxLength": 2000},
                "verified": {"const": False, "description": "set by maintainers through verification, never here"},
                "runnable": RUNNABLE_SCHEMA,
            },
        },
        "suite": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "version"],
            "properties": {"name": {"type": "string", "maxLength": 100}, "version": {"type": "string"}},
        },
        "agentgym_version": {"type": "string", "maxLength": 50},
        "envs": {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 16,
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ref", "spec_hash"],
                "properties": {
                    "ref": {
                        "type": "string",
                        "pattern": r"^[^@\s]+-v\d+@\S+$",
                        "description": "ENV_ID@AGENTGYM_VERSION",
                    },
                    "spec_hash": {"type": "string", "pattern": r"^[0-9a-f]{16}$"},
                },
            },
        },
        "results": {"type": "object", "minProperties": 1, "additionalProperties": _RESULT_COLUMNS},
        "episodes": {
            "type": "array",
            "minItems": 1,
            "maxItems": 16,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "env_id", "count", "sha256"],
                "properties": {
                    "path": {"type": "string", "pattern": r"^episodes/[A-Za-z0-9._-]+\.jsonl\.gz$"},
                    "env_id": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1},
                    "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                },
            },
        },
        "created_at": {"type": "string", "maxLength": 40},
        "notes": {"type": "string", "maxLength": 4000},
    },
}


def schema_errors(data: Any) -> list[str]:
    """Every schema violation of a parsed ``submission.json``, each as ``"<json path>: <message>"``.

    Raises:
        ImportError: jsonschema is missing (it comes with ``pip install "agentgym[web]"`` or ``[dev]``).
    """
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - jsonschema is in the web and dev extras
        raise ImportError('validating submissions needs jsonschema: pip install "agentgym[web]"') from exc
    validator = jsonschema.Draft202012Validator(SUBMISSION_SCHEMA)
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        where = "submission.json" + "".join(f"[{p!r}]" for p in err.absolute_path)
        out.append(f"{where}: {err.message}")
    return out


def runnable_errors(runnable: Any) -> list[str]:
    """What a runnable block lacks to be re-run exactly (empty for ``logs_only`` blocks and pinned specs).

    Scripted specs need nothing more; ``module:Class`` needs ``code_sha256`` (the reviewed source); model
    specs need ``model.revision`` (a hub commit) or ``model.checkpoint_sha256`` (a local folder's files, see
    :func:`agentgym.models.loading.checkpoint_sha256`), ``prompt_version`` and ``sampling``. API models
    (``openai:``) cannot be pinned: their weights cannot be checked, so they are logs only.
    """
    where = "submission.json['agent']['runnable']"
    if not isinstance(runnable, dict):
        return [f"{where}: missing; give a runnable spec or {{'logs_only': true, 'reason': ...}}"]
    if runnable.get("logs_only") is True:
        return []
    spec = runnable.get("spec")
    if not isinstance(spec, str) or not spec:
        return [f"{where}['spec']: missing"]
    if spec in SCRIPTED_SPECS:
        return []
    out = []
    if spec.startswith(MODEL_PREFIXES):
        from agentgym.agents import model_target

        backend, model_id, spec_revision = model_target(spec) or ("hf", "", None)
        model = runnable.get("model") or {}
        revision = model.get("revision")
        if backend == "openai":
            return [
                f"{where}['spec']: {spec} is an API model: the weights behind the server cannot be checked, so a "
                "rerun could not show that the pinned model ran; mark the entry logs_only, or serve the pinned "
                "checkpoint's folder and submit it as hf:FOLDER"
            ]
        if not (revision or model.get("checkpoint_sha256")):
            out.append(
                f"{where}['model']: {spec} is not pinned; give model.revision (the hub commit) or "
                "model.checkpoint_sha256, or mark the entry logs_only"
            )
        if revision and not re.fullmatch(COMMIT, revision):
            out.append(
                f"{where}['model']['revision']: {revision!r} is not a 40-hex commit; a branch or tag can move, "
                "so it pins nothing: give the commit"
            )
        if spec_revision and revision and spec_revision != revision:
            out.append(f"{where}['model']['revision']: {revision} differs from the revision in the spec {spec}")
        if model.get("id") and model["id"] != model_id:
            out.append(f"{where}['model']['id']: {model['id']!r} is not the model of the spec {spec} ({model_id!r})")
        if not runnable.get("prompt_version"):
            out.append(f"{where}['prompt_version']: missing for model agent {spec}")
        if not isinstance(runnable.get("sampling"), dict):
            out.append(f"{where}['sampling']: missing (temperature, top_p, max_new_tokens) for model agent {spec}")
        return out
    module, sep, cls = spec.partition(":")
    if not sep or not module or not cls:
        return [f"{where}['spec']: {spec!r} is none of random, expert, module:Class, hf:..., openai:..."]
    if not runnable.get("code_sha256"):
        out.append(f"{where}['code_sha256']: missing; the sha256 of {module}'s source pins the code to re-run")
    return out


def write_schema(path: str | Path) -> Path:
    """Write :data:`SUBMISSION_SCHEMA` as pretty JSON (what ``leaderboards/schema/`` holds)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(SUBMISSION_SCHEMA, indent=2) + "\n", encoding="utf-8")
    return path
