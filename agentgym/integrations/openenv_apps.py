"""One OpenEnv app per registered id, by name, for the ``app:`` line of an ``openenv.yaml``.

``agentgym.integrations.openenv_apps:sokoban_v0`` is :func:`~agentgym.integrations.openenv.make_app` of
``agentgym/Sokoban-v0`` with the default bounds, made on first access (uvicorn imports it by that string).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from agentgym.integrations.openenv import app_name, make_app

_apps: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    ids = {app_name(i): i for i in gym.registry if i.startswith("agentgym/")}
    if name not in ids:
        raise AttributeError(f"no agentgym env id is served as {name!r}; known: {', '.join(sorted(ids))}")
    if name not in _apps:
        _apps[name] = make_app(ids[name])
    return _apps[name]
