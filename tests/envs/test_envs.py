"""The env contract (DESIGN.md section 2) on every registered ``agentgym/*`` id.

For each id: Gymnasium's ``check_env`` passes without warnings; a seeded rollout is reproducible; info
carries the required keys; garbage actions (empty, 10 kB, unicode, control characters) never raise, are
flagged invalid and leave the state as it was; the registration's step limit truncates; ``ansi`` renders.
Data-backed envs whose module, extra or data is absent are skipped with the reason.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import DependencyNotInstalled
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401
from agentgym.core import MAX_ACTION_LENGTH, TextEnv
from agentgym.data import DataNotFoundError
from agentgym.episodes import to_jsonable

ENV_IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("agentgym/"))
REQUIRED_INFO = ("is_action_valid", "success", "task_id")
GARBAGE = [
    "",
    "   ",
    "x" * 10_240,
    "上下左右 ⬆️🚀 ñ",
    "\x00\x01\x1b[2J\r\n\t\x7f",
    "}{[]()<>||;--",
    "up\x00down",
]
#: What a missing extra, module or data set looks like when an env is made or reset.
MISSING = (ImportError, DependencyNotInstalled, DataNotFoundError)


def _skip_if_missing(env_id: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except MISSING as exc:
        name = getattr(exc, "name", None)
        entry = str(gym.spec(env_id).entry_point).partition(":")[0]
        if (
            isinstance(exc, ModuleNotFoundError)
            and name
            and name.startswith("agentgym")
            and not entry.startswith(name)
        ):
            raise  # a broken import inside agentgym is a bug, not a missing extra
        pytest.skip(f"{env_id} unavailable here ({type(exc).__name__}: {exc})")


#: Per-id kwargs for the contract tests: ALFWorld plays an eval split (its default, train, unpacks 3,553 games).
TEST_KWARGS: dict[str, dict[str, Any]] = {
    "agentgym/ALFWorld-v0": {"split": "valid_seen"},
    "agentgym/ALFWorldPut-v0": {"split": "valid_seen"},
}


def _skip_without_browser(env_id: str) -> None:
    """Browser-mode envs need Debian's chromium + chromium-driver (``make setup`` installs them as root)."""
    if "Browser" not in env_id:
        return
    from agentgym.envs.webshop.browser import CHROMEDRIVER, CHROMIUM

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{env_id} needs {' and '.join(missing)} (apt-get install chromium chromium-driver)")


def make(env_id: str, **kwargs: Any) -> gym.Env:
    _skip_without_browser(env_id)
    kwargs = {**TEST_KWARGS.get(env_id, {}), **kwargs}
    return _skip_if_missing(env_id, lambda: gym.make(env_id, **kwargs))


def reset(env: gym.Env, seed: int | None = None, options: dict | None = None):
    return _skip_if_missing(env.spec.id if env.spec else "env", lambda: env.reset(seed=seed, options=options))


def pick(info: dict[str, Any], rng: np.random.Generator) -> str:
    choices = info.get("admissible_actions") or []
    return str(choices[int(rng.integers(len(choices)))]) if choices else "look"


def rollout(env_id: str, seed: int, n_steps: int = 8) -> list[Any]:
    """A seeded rollout whose actions are drawn (with a fixed generator) from the admissible actions."""
    env = make(env_id)
    rng = np.random.default_rng(1234)
    obs, info = reset(env, seed=seed)
    trace: list[Any] = [obs, to_jsonable(info)]
    for key in REQUIRED_INFO:
        assert key in info, f"reset info lacks {key!r}"
    for _ in range(n_steps):
        obs, reward, terminated, truncated, info = env.step(pick(info, rng))
        for key in REQUIRED_INFO:
            assert key in info, f"step info lacks {key!r}"
        assert isinstance(obs, str) and isinstance(reward, (int, float))
        trace.append((obs, float(reward), bool(terminated), bool(truncated), to_jsonable(info)))
        if terminated or truncated:
            break
    env.close()
    return trace


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env(env_id):
    env = make(env_id)
    _skip_if_missing(env_id, lambda: env.reset(seed=0))
    assert isinstance(env.unwrapped, TextEnv)
    assert isinstance(env.observation_space, spaces.Text) and isinstance(env.action_space, spaces.Text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    problems = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert not problems, problems
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_seeded_rollout_is_deterministic(env_id):
    assert rollout(env_id, seed=7) == rollout(env_id, seed=7)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_garbage_actions_are_invalid_and_change_nothing(env_id):
    dirty, clean = make(env_id), make(env_id)
    obs_d, info_d = reset(dirty, seed=3)
    obs_c, info_c = reset(clean, seed=3)
    assert obs_d == obs_c
    raw = dirty.unwrapped  # bypass the TimeLimit: garbage steps must not change what follows
    for action in GARBAGE:
        obs, reward, terminated, truncated, info = raw.step(action)
        assert isinstance(obs, str) and obs, repr(action)
        assert info["is_action_valid"] is False, repr(action)
        assert isinstance(info.get("invalid_reason"), str) and info["invalid_reason"]
        assert not terminated and not truncated
        assert len(obs) < len(obs_d) + 2_000, "a garbage action must not be echoed back in full"
        assert raw.observation_space.contains(obs), f"observation after {action[:20]!r} is outside the space"
    rng_d, rng_c = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(3):
        a_d, a_c = pick(info_d, rng_d), pick(info_c, rng_c)
        assert a_d == a_c
        out_d, out_c = raw.step(a_d), clean.unwrapped.step(a_c)
        assert out_d[:4] == out_c[:4]
        info_d, info_c = out_d[4], out_c[4]
        if out_d[2]:
            break


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_truncates_at_the_registered_step_limit(env_id):
    limit = gym.spec(env_id).max_episode_steps
    assert limit is not None and limit > 0, "every agentgym env needs max_episode_steps at registration"
    env = make(env_id)
    reset(env, seed=0)
    for t in range(limit):
        _, _, terminated, truncated, info = env.step("")
        assert not terminated and info["is_action_valid"] is False
        assert truncated == (t == limit - 1)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_ansi_render_is_the_observation(env_id):
    env = make(env_id, render_mode="ansi")
    obs, _ = reset(env, seed=1)
    assert env.render() == obs


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_version_suffix_and_docstring_sections(env_id):
    assert env_id.rsplit("-v", 1)[1].isdigit()
    env = make(env_id)
    doc = type(env.unwrapped).__doc__ or ""
    for section in ("Description", "Action Space", "Observation Space", "Rewards", "Episode End", "Information"):
        assert section in doc, f"{type(env.unwrapped).__name__} docstring lacks the {section!r} section"


def _repeat(unit: str, length: int) -> str:
    return (unit * (length // len(unit) + 1))[:length]


#: Inputs a degenerate sampler produces, each at just under the contract's limit (the parsers run on them) and
#: at 1 MiB (rejected for its length before any parsing).
PATHOLOGICAL_UNITS = {
    "brackets": "[",
    "search[": "search[",
    "click[": "click[",
    "boxed": "\\boxed{",
    "parens": "(",
    "think": "<think>",
    "nul": "\x00",
}


def pathological_actions(length: int) -> dict[str, str]:
    actions = {name: _repeat(unit, length) for name, unit in PATHOLOGICAL_UNITS.items()}
    depth = (length - len("search[]")) // 2
    actions["nested"] = "search[" + "[" * depth + "]" * depth + "]"
    return actions


@pytest.mark.timeout(120)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pathological_actions_are_invalid_and_cheap_to_reject(env_id):
    """Repeated brackets, tool names, ``\\boxed{``, ``<think>``, NULs, nesting: invalid with a reason, state kept."""
    env, clean = make(env_id), make(env_id)
    obs0, _ = reset(env, seed=3)
    reset(clean, seed=3)
    raw = env.unwrapped
    for length in (MAX_ACTION_LENGTH, 1 << 20):
        for name, action in pathological_actions(length).items():
            assert len(action) == length
            obs, reward, terminated, truncated, info = raw.step(action)
            assert info["is_action_valid"] is False, (name, length)
            reason = info["invalid_reason"]
            assert isinstance(reason, str) and reason
            assert ("too long" in reason) == (length > MAX_ACTION_LENGTH), (name, length, reason)
            assert reward == 0 and not terminated and not truncated
            assert len(obs) < len(obs0) + 2_000, "a pathological action must not be echoed back in full"
    # the state is what it was: the next real action gives what it gives in an env that saw none of this
    try:
        action = raw.expert_action()
    except NotImplementedError:
        action = "look"
    assert raw.step(action)[:4] == clean.unwrapped.step(action)[:4]
