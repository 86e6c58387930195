"""Episode records, logging hooks, a crash-safe JSONL writer/reader and replay (DESIGN.md section 4).

An :class:`Episode` holds everything needed to read, score and re-run one episode: the env id, its
constructor kwargs, the reset seed and options, the reset observation and every step (model output,
parsed action, the observation and reward that came back, flags and info).

Hooks are objects with any of ``on_reset(episode)``, ``on_step(episode, step)`` and
``on_episode_end(episode)``. :class:`RecordEpisode` is a Gymnasium wrapper that builds the record and
calls the hooks; the batched rollout engine uses :class:`EpisodeBuilder` directly. :class:`JsonlWriter`
is one hook: it appends one episode per line and fsyncs, so a killed process loses at most the episode
in flight. :func:`read_episodes` skips a truncated last line. :func:`replay` re-runs an episode from
its seed and actions and lists every observation or reward that differs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from agentgym.version import __version__

#: Version of the episode record layout; readers reject newer ones.
RECORD_VERSION = 1

log = logging.getLogger(__name__)


class LogFormatError(ValueError):
    """A line of an episode log that is not an episode record (the message names the file and line)."""


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets and dataclasses to JSON types; anything else to ``repr``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    return repr(value)


@dataclass
class Step:
    """One turn: what the agent said, what was sent to the env, and what came back."""

    action: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)
    output: str | None = None  # raw model output (None for non-LLM agents)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extras: dict[str, Any] = field(default_factory=dict)  # e.g. per-turn values, lesson ids


@dataclass
class Episode:
    """A whole episode, as written to a JSONL log (one per line)."""

    env_id: str
    seed: int | None
    reset_observation: str
    reset_info: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    agent: str = ""
    agent_config: dict[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)  # lessons (SEED), reflections (ERL), run ids ...
    started_at: float = 0.0
    ended_at: float = 0.0
    agentgym_version: str = ""
    record_version: int = RECORD_VERSION

    # -- totals -----------------------------------------------------------------------------------
    @property
    def total_return(self) -> float:
        return float(sum(s.reward for s in self.steps))

    @property
    def length(self) -> int:
        return len(self.steps)

    @property
    def success(self) -> bool:
        return bool(self.steps and self.steps[-1].info.get("success", False))

    @property
    def done(self) -> bool:
        return bool(self.steps and (self.steps[-1].terminated or self.steps[-1].truncated))

    @property
    def invalid_steps(self) -> int:
        return sum(1 for s in self.steps if not s.info.get("is_action_valid", True))

    @property
    def tokens(self) -> dict[str, int]:
        return {
            "prompt": sum(s.prompt_tokens for s in self.steps),
            "completion": sum(s.completion_tokens for s in self.steps),
        }

    @property
    def env_version(self) -> int:
        from agentgym.core import env_version

        return env_version(self.env_id)

    def totals(self) -> dict[str, Any]:
        return {
            "return": self.total_return,
            "success": self.success,
            "length": self.length,
            "invalid_steps": self.invalid_steps,
            "tokens": self.tokens,
        }

    # -- (de)serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = to_jsonable(dataclasses.asdict(self))
        d["totals"] = self.totals()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        if not isinstance(d, dict):
            raise ValueError("an episode record must be a JSON object")
        version = d.get("record_version", 1)
        if not isinstance(version, int) or version > RECORD_VERSION:
            raise ValueError(
                f"episode record_version {version!r} is newer than this agentgym reads ({RECORD_VERSION})"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [k for k in ("env_id", "seed", "reset_observation", "steps") if k not in d]
        if missing:
            raise ValueError(f"episode record lacks field(s) {missing}")
        kwargs = {k: v for k, v in d.items() if k in names}
        step_names = {f.name for f in dataclasses.fields(Step)}
        steps = []
        for i, s in enumerate(d["steps"]):
            if not isinstance(s, dict):
                raise ValueError(f"steps[{i}] must be an object")
            lacking = [k for k in ("action", "observation", "reward", "terminated", "truncated") if k not in s]
            if lacking:
                raise ValueError(f"steps[{i}] lacks field(s) {lacking}")
            steps.append(Step(**{k: v for k, v in s.items() if k in step_names}))
        kwargs["steps"] = steps
        return cls(**kwargs)


class EpisodeHook(Protocol):
    """Any object with some of these methods can be a hook; all are optional."""

    def on_reset(self, episode: Episode) -> None: ...

    def on_step(self, episode: Episode, step: Step) -> None: ...

    def on_episode_end(self, episode: Episode) -> None: ...


def _call(hooks: Sequence[Any], name: str, *args: Any) -> None:
    for hook in hooks:
        fn = getattr(hook, name, None)
        if fn is not None:
            fn(*args)


class EpisodeBuilder:
    """Builds one :class:`Episode` turn by turn and fires hooks; used by the wrapper and the rollout engine."""

    def __init__(self, hooks: Sequence[Any] = ()) -> None:
        self.hooks = list(hooks)
        self.episode: Episode | None = None

    def start(
        self,
        *,
        env_id: str,
        seed: int | None,
        observation: str,
        info: dict[str, Any],
        options: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        agent: str = "",
        agent_config: dict[str, Any] | None = None,
        extras: dict[str, Any] | None = None,
    ) -> Episode:
        self.episode = Episode(
            env_id=env_id,
            seed=seed,
            reset_observation=observation,
            reset_info=to_jsonable(info),
            options=to_jsonable(options) if options is not None else None,
            env_kwargs=to_jsonable(env_kwargs or {}),
            task_id=None if info.get("task_id") is None else str(info.get("task_id")),
            agent=agent,
            agent_config=to_jsonable(agent_config or {}),
            extras=dict(extras or {}),
            started_at=time.time(),
            agentgym_version=__version__,
        )
        _call(self.hooks, "on_reset", self.episode)
        return self.episode

    def add_step(
        self,
        *,
        action: str,
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any],
        output: str | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        extras: dict[str, Any] | None = None,
    ) -> Step:
        if self.episode is None:
            raise RuntimeError("add_step() before start(): reset the env first")
        step = Step(
            action=action,
            observation=observation,
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
            info=to_jsonable(info),
            output=output,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            extras=dict(extras or {}),
        )
        self.episode.steps.append(step)
        _call(self.hooks, "on_step", self.episode, step)
        if step.terminated or step.truncated:
            self.finish()
        return step

    def finish(self) -> Episode | None:
        """End the episode (called automatically on terminated/truncated) and fire ``on_episode_end``."""
        episode, self.episode = self.episode, None
        if episode is not None:
            episode.ended_at = time.time()
            _call(self.hooks, "on_episode_end", episode)
        return episode


class RecordEpisode(gym.Wrapper):
    """Record every episode of an env and call hooks on reset, step and episode end.

    Wrap outside the TimeLimit (``gym.make`` output) so truncations are seen. To log the raw model output
    and token counts of the next step, call :meth:`annotate` before :meth:`step`.

    Args:
        env: the env to record (typically ``gym.make(env_id)``).
        hooks: objects with ``on_reset`` / ``on_step`` / ``on_episode_end`` methods.
        agent: agent name stored in each record.
        agent_config: agent settings stored in each record.
    """

    def __init__(
        self, env: gym.Env, hooks: Sequence[Any] = (), agent: str = "", agent_config: dict | None = None
    ) -> None:
        super().__init__(env)
        self.builder = EpisodeBuilder(hooks)
        self.agent = agent
        self.agent_config = agent_config or {}
        self._meta: dict[str, Any] = {}
        self.last_episode: Episode | None = None

    @property
    def hooks(self) -> list[Any]:
        return self.builder.hooks

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.builder.episode is not None:  # abandoned mid-episode: still log what happened
            self.last_episode = self.builder.finish()
        obs, info = self.env.reset(seed=seed, options=options)
        spec = self.env.spec
        self.builder.start(
            env_id=spec.id if spec is not None else type(self.env.unwrapped).__name__,
            seed=seed,
            observation=obs,
            info=info,
            options=options,
            env_kwargs=dict(spec.kwargs) if spec is not None else {},
            agent=self.agent,
            agent_config=self.agent_config,
        )
        return obs, info

    def annotate(self, *, output: str | None = None, prompt_tokens: int = 0, completion_tokens: int = 0, **extras):
        """Attach the raw model output / token counts / extras to the next step's record."""
        self._meta = {"output": output, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        if extras:
            self._meta["extras"] = extras

    def step(self, action: str):
        obs, reward, terminated, truncated, info = self.env.step(action)
        meta, self._meta = self._meta, {}
        episode = self.builder.episode
        self.builder.add_step(
            action=action,
            observation=obs,
            reward=float(reward),
            terminated=terminated,
            truncated=truncated,
            info=info,
            **meta,
        )
        if terminated or truncated:
            self.last_episode = episode
        return obs, reward, terminated, truncated, info

    def close(self):
        if self.builder.episode is not None:
            self.last_episode = self.builder.finish()
        super().close()


class JsonlWriter:
    """Hook that appends each finished episode as one JSON line, flushed and fsynced.

    A process killed mid-run loses at most the episode in flight; :func:`read_episodes` skips a partly
    written last line, so a resumed run appends after the complete ones.
    """

    def __init__(self, path: str | os.PathLike[str], fsync: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._repair_tail()
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (kept open for the run)

    def _repair_tail(self) -> None:
        # A kill during a write can leave a last line without its newline: cut it so appends stay parseable.
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            fh.truncate(cut)
        log.debug(
            "%s: removed a cut last line (%d bytes, a run killed mid-write); resuming after the complete episodes",
            self.path,
            len(data) - cut,
        )

    def write(self, episode: Episode) -> None:
        self._fh.write(json.dumps(episode.to_dict(), ensure_ascii=False) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())

    def on_episode_end(self, episode: Episode) -> None:
        self.write(episode)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_episodes(path: str | os.PathLike[str], strict: bool = False) -> Iterator[Episode]:
    """Yield the episodes of a JSONL log (plain or ``.gz``).

    A truncated or corrupt *last* line (a kill mid-write) is skipped; a corrupt line elsewhere raises
    ``ValueError`` naming the line, as does any bad line with ``strict=True``.
    """
    path = Path(path)
    if path.suffix == ".gz":
        import gzip

        with gzip.open(path, "rb") as fh:
            raw = fh.read()
    else:
        raw = path.read_bytes()
    lines = raw.split(b"\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            yield Episode.from_dict(record)
        except (ValueError, TypeError) as exc:
            if i == last and not strict and not raw.endswith(b"\n"):
                log.warning(
                    "%s: line %d is cut (a run killed mid-write): skipped, and removed on the next append", path, i + 1
                )
                return
            raise LogFormatError(f"{path}: line {i + 1} is not a valid episode record: {exc}") from exc


def read_episodes(path: str | os.PathLike[str], strict: bool = False) -> list[Episode]:
    """All episodes of a JSONL log; see :func:`iter_episodes`."""
    return list(iter_episodes(path, strict=strict))


@dataclass
class ReplayResult:
    """Outcome of :func:`replay`: ``ok`` when every observation, reward and flag matched."""

    ok: bool
    mismatches: list[str]

    def __bool__(self) -> bool:
        return self.ok


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool | str):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)
    return a == b


def _info_mismatches(where: str, logged: dict[str, Any], replayed: dict[str, Any], keys: Sequence[str]) -> list[str]:
    out = []
    for key in keys:
        if key not in logged and key not in replayed:
            continue
        a, b = logged.get(key), to_jsonable(replayed.get(key))
        if not _same_value(a, b):
            out.append(f"{where}.info[{key!r}]: logged {a!r}, replayed {b!r}")
    return out


def replay(
    episode: Episode, env: gym.Env | None = None, reward_tol: float = 1e-6, info_keys: Sequence[str] = ()
) -> ReplayResult:
    """Re-run a logged episode from its seed, options and actions; report every difference.

    Compares the reset observation, then per step the observation, reward and end flags, and the
    ``info_keys`` of the reset and of every step (the leaderboard passes the keys a score is computed
    from, so that an edited ``info["success"]`` is caught too).

    Args:
        episode: the record to check.
        env: an env to reuse (made from ``episode.env_id`` and ``env_kwargs`` when None).
        reward_tol: absolute tolerance on rewards.
        info_keys: info keys that must match as well.
    """
    import agentgym.envs  # noqa: F401  (registers the ids that gym.make looks up)

    own = env is None
    mismatches: list[str] = []
    try:
        if env is None:
            env = gym.make(episode.env_id, **episode.env_kwargs)
        obs, info = env.reset(seed=episode.seed, options=episode.options)
        if obs != episode.reset_observation:
            mismatches.append("reset_observation differs")
        mismatches += _info_mismatches("reset", episode.reset_info, info, info_keys)
        for t, step in enumerate(episode.steps):
            obs, reward, terminated, truncated, info = env.step(step.action)
            if obs != step.observation:
                mismatches.append(f"steps[{t}].observation differs")
            if not math.isclose(float(reward), float(step.reward), abs_tol=reward_tol):
                mismatches.append(f"steps[{t}].reward: logged {step.reward}, replayed {float(reward)}")
            if bool(terminated) != bool(step.terminated) or bool(truncated) != bool(step.truncated):
                mismatches.append(
                    f"steps[{t}] flags: logged terminated={step.terminated} truncated={step.truncated}, "
                    f"replayed {bool(terminated)}/{bool(truncated)}"
                )
            mismatches += _info_mismatches(f"steps[{t}]", step.info, info, info_keys)
            if (terminated or truncated) and t != len(episode.steps) - 1:
                mismatches.append(f"steps[{t}]: episode ended on replay but the log goes on")
                break
    except Exception as exc:  # a replay that crashes is a failed verification, not a crash of the verifier
        mismatches.append(f"replay raised {type(exc).__name__}: {exc}")
    finally:
        if own and env is not None:
            env.close()
    return ReplayResult(ok=not mismatches, mismatches=mismatches)


def summarize(episodes: Iterable[Episode]) -> dict[str, float]:
    """Success rate, mean return, mean length and invalid-action rate over episodes."""
    eps = list(episodes)
    if not eps:
        return {"episodes": 0, "success_rate": 0.0, "mean_return": 0.0, "mean_length": 0.0, "invalid_rate": 0.0}
    steps = sum(e.length for e in eps)
    return {
        "episodes": len(eps),
        "success_rate": sum(e.success for e in eps) / len(eps),
        "mean_return": sum(e.total_return for e in eps) / len(eps),
        "mean_length": steps / len(eps),
        "invalid_rate": (sum(e.invalid_steps for e in eps) / steps) if steps else 0.0,
    }
