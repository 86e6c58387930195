"""The environment contract every agentgym env follows (DESIGN.md section 2).

A :class:`TextEnv` is a ``gymnasium.Env[str, str]``: observations and actions are text. The class adds
nothing to Gymnasium's API; it fixes the conventions that make envs interchangeable for agents, the
rollout engine and the leaderboard:

* ``observation_space`` and ``action_space`` are :class:`gymnasium.spaces.Text`.
* ``reset`` calls ``super().reset(seed=seed)`` first and draws all randomness from ``self.np_random``.
* ``step`` never raises on a malformed or impossible action: the state stays as it was, the observation
  says what went wrong, and ``info["is_action_valid"]`` is False with ``info["invalid_reason"]`` set.
* Parsing is linear in the action's length, and an action longer than :data:`MAX_ACTION_LENGTH` characters is
  invalid (:func:`action_length_error` gives the reason) before any parsing, so no action is ever slow.
* ``info`` always carries ``is_action_valid``, ``success`` and ``task_id`` (see :meth:`TextEnv.make_info`).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium import spaces

#: Characters a text observation or action may contain: printable ASCII, the box-drawing and symbol
#: characters our renderers use, and the Latin-1 / general punctuation ranges that product and
#: Wikipedia text contains. ``spaces.Text.contains`` is only used by checkers; envs accept any string.
CHARSET: frozenset[str] = frozenset(
    string.printable
    + "√"
    + "".join(chr(c) for c in range(0xA0, 0x250))
    + "".join(chr(c) for c in range(0x2000, 0x2070))
    + "".join(chr(c) for c in range(0x2190, 0x2200))
    + "".join(chr(c) for c in range(0x2500, 0x25A0))
)

#: Upper bound on the length of an observation or action string in the Text spaces.
MAX_TEXT_LENGTH = 1 << 20

#: Longest action an env accepts, in characters (the action space's ``max_length``). A longer action is an
#: invalid action (reason from :func:`action_length_error`), checked before parsing, whatever the env: a model
#: that degenerates into repeated brackets costs one cheap invalid step, never a stalled worker. 65,536
#: characters is several times the longest reply of any model budget we run (an ERL-style reply with its
#: reasoning and ``\boxed{}`` answer is a few thousand characters), so only runaway generations hit it.
#: Adding this rule bumped no env version: no episode recorded in leaderboards/ has an action over 280 characters.
MAX_ACTION_LENGTH = 1 << 16


def text_space(max_length: int = MAX_TEXT_LENGTH, charset: frozenset[str] | str = CHARSET) -> spaces.Text:
    """A ``spaces.Text`` wide enough for any observation or action of our envs."""
    return spaces.Text(max_length=max_length, min_length=0, charset=charset)


class TextEnv(gym.Env[str, str]):
    """Base class of all agentgym environments: text in, text out.

    Subclasses implement ``reset`` and ``step`` and build their ``info`` dicts with :meth:`make_info`.
    They may implement :meth:`expert_action` (privileged: used by expert agents and tests, never shown
    to a learning agent).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.observation_space = text_space()
        # Actions are short; a smaller bound keeps `action_space.sample()` (used by check_env) fast.
        self.action_space = text_space(max_length=MAX_ACTION_LENGTH)
        self._last_observation: str = ""

    # -- helpers for subclasses -------------------------------------------------------------------
    def make_info(
        self,
        *,
        task_id: str | None,
        success: bool = False,
        is_action_valid: bool = True,
        invalid_reason: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Build an ``info`` dict with the keys every env must provide."""
        info: dict[str, Any] = {"is_action_valid": bool(is_action_valid), "success": bool(success), "task_id": task_id}
        if not is_action_valid:
            info["invalid_reason"] = invalid_reason or "invalid action"
        info.update(extra)
        return info

    def invalid_step(
        self, observation: str, text: str, reason: str, *, terminated: bool, info: dict[str, Any]
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The ``step`` result of an action that was not applied: reward 0, state unchanged.

        The observation is ``observation`` plus a line naming the action (its first 40 characters,
        ascii-escaped so it stays in the charset) and ``reason``; it becomes the rendered observation.
        """
        shown = text[:40] + ("..." if len(text) > 40 else "")
        obs = f"{observation}\nInvalid action {ascii(shown)}: {reason}."
        self._last_observation = obs
        return obs, 0.0, terminated, False, info

    def render(self) -> str | None:  # type: ignore[override]
        """With ``render_mode="ansi"``, the current observation text."""
        if self.render_mode == "ansi":
            return self._last_observation
        return None

    def expert_action(self) -> str:
        """The next action of this env's expert from the current state (privileged information)."""
        raise NotImplementedError(f"{type(self).__name__} has no expert")


#: The env families of agentgym, by the name their ids start with (``agentgym/Sokoban8x8B2-v0`` is Sokoban).
ENV_FAMILIES: tuple[str, ...] = ("ALFWorld", "WebShop", "HotpotQA", "Sokoban", "FrozenLake")


@dataclass(frozen=True)
class EnvId:
    """An env id taken apart: ``[module:][namespace/]name[-vN]`` (Gymnasium's form).

    Attributes:
        namespace: ``agentgym`` in ``agentgym/Sokoban-v0`` (None when absent).
        name: ``Sokoban8x8B2`` in ``agentgym/Sokoban8x8B2-v0``.
        version: ``N`` of ``-vN`` (None when absent).
        family: the :data:`ENV_FAMILIES` entry the name starts with (case-insensitive), else None.
    """

    namespace: str | None
    name: str
    version: int | None
    family: str | None


def parse_env_id(env_id: str) -> EnvId:
    """The one parser of env ids; everything that reads a family or version from an id calls it."""
    rest = env_id.split(":", 1)[1] if ":" in env_id else env_id  # "agentgym:agentgym/X-v0": module prefix
    namespace, _, name = rest.rpartition("/")
    version = None
    head, sep, tail = name.rpartition("-v")
    if sep and head and tail.isdigit():
        name, version = head, int(tail)
    lower = name.lower()
    family = next(
        (f for f in sorted(ENV_FAMILIES, key=len, reverse=True) if lower.startswith(f.lower())),
        None,
    )
    return EnvId(namespace or None, name, version, family)


def env_family(env_id: str) -> str | None:
    """The family of an id (``agentgym/WebShopBrowser-v0`` -> ``WebShop``), None for other envs."""
    return parse_env_id(env_id).family


def env_version(env_id: str) -> int:
    """The ``N`` of an id ending in ``-vN``."""
    version = parse_env_id(env_id).version
    if version is None:
        raise ValueError(f"env id {env_id!r} does not end in -vN")
    return version


def action_length_error(text: str) -> str | None:
    """Why ``text`` is too long to be an action (over :data:`MAX_ACTION_LENGTH` characters), or None.

    Every env calls this on the normalized action before parsing it and returns an invalid step with this
    reason when it is not None.
    """
    if len(text) <= MAX_ACTION_LENGTH:
        return None
    return (
        f"action too long ({len(text):,} characters; at most {MAX_ACTION_LENGTH:,}): send one short action, "
        "not a whole transcript"
    )


def normalize_action(action: object) -> str:
    """Coerce whatever an agent sent into a string an env can parse (bytes decode, None becomes '')."""
    if action is None:
        return ""
    if isinstance(action, bytes):
        return action.decode("utf-8", errors="replace")
    return action if isinstance(action, str) else str(action)
