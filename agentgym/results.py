"""The papers' result tables, computed from episode logs.

One function, :func:`env_results`, turns the episodes of one env into the columns the published
tables use (the published tables in ``leaderboards/reported/``):

* ALFWorld: success rate (%) per task type ``Pick Look Clean Heat Cool Pick2`` and ``All``, the type
  read from ``info["task_type"]`` (reset info, else the step infos).
* WebShop: ``Score`` = mean final ``task_score`` x 100 and ``Succ.`` = success rate (%).
* Sokoban, FrozenLake and anything else: ``Success`` (%) and ``Return`` (mean episode return).
* HotpotQA: ``EM`` and ``F1`` (%, from the final step's ``info["em"]`` / ``info["f1"]``).

Values are rounded to :data:`DECIMALS` places so that a submission's claimed numbers can be compared
with the recomputed ones exactly up to :data:`TOLERANCE`. :func:`mean_std` aggregates runs over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentgym.core import env_family
from agentgym.episodes import Episode

#: Decimal places kept in result values.
DECIMALS = 4
#: Largest difference between a claimed and a recomputed value that still counts as equal.
TOLERANCE = 1e-3

#: ALFWorld task-type columns in the papers' order.
ALFWORLD_TYPES: tuple[str, ...] = ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2")
#: ALFWorld's numeric task types (``alfworld/agents/environment``: 1..6) -> column.
_ALFWORLD_NUMERIC = {1: "Pick", 2: "Look", 3: "Clean", 4: "Heat", 5: "Cool", 6: "Pick2"}


class ResultsError(ValueError):
    """The episodes cannot be scored (e.g. an ALFWorld episode without a known task type)."""


def columns(env_id: str) -> list[str]:
    """The result columns of an env, in table order."""
    fam = env_family(env_id)
    if fam == "ALFWorld":
        return [*ALFWORLD_TYPES, "All"]
    if fam == "WebShop":
        return ["Score", "Succ."]
    if fam == "HotpotQA":
        return ["EM", "F1"]
    return ["Success", "Return"]


def alfworld_type(value: Any) -> str | None:
    """Map any spelling of an ALFWorld task type to its column (``pick_two_obj_and_place`` -> ``Pick2``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _ALFWORLD_NUMERIC.get(value)
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    if v.isdigit():
        return _ALFWORLD_NUMERIC.get(int(v))
    # Order matters: "pick_two_obj_and_place" and "pick_clean_then_place" both contain "pick".
    for needle, col in (("two", "Pick2"), ("pick2", "Pick2"), ("look", "Look"), ("clean", "Clean")):
        if needle in v:
            return col
    for needle, col in (("heat", "Heat"), ("cool", "Cool"), ("pick", "Pick")):
        if needle in v:
            return col
    return None


def _info_value(episode: Episode, key: str) -> Any:
    if key in episode.reset_info:
        return episode.reset_info[key]
    for step in episode.steps:
        if key in step.info:
            return step.info[key]
    return None


def _final(episode: Episode, key: str, default: float = 0.0) -> float:
    # The last step's value is the episode's: WebShop scores on "buy", HotpotQA on "finish".
    for step in reversed(episode.steps):
        if key in step.info and step.info[key] is not None:
            try:
                return float(step.info[key])
            except (TypeError, ValueError):
                return default
    return default


def _pct(values: Sequence[float]) -> float:
    return round(100.0 * sum(values) / len(values), DECIMALS) if values else 0.0


def describe(episode: Episode) -> str:
    """A short name of an episode for messages: task id, seed and options."""
    parts = []
    if episode.task_id:
        parts.append(f"task {episode.task_id}")
    parts.append(f"seed {episode.seed}")
    if episode.options:
        parts.append(f"options {episode.options}")
    return ", ".join(parts)


def env_results(env_id: str, episodes: Iterable[Episode]) -> dict[str, float]:
    """The table columns of one env from its episodes (see the module docstring).

    Raises:
        ResultsError: an ALFWorld episode has no recognisable ``task_type``.
    """
    eps = list(episodes)
    fam = env_family(env_id)
    if fam == "ALFWorld":
        by_type: dict[str, list[float]] = {c: [] for c in ALFWORLD_TYPES}
        for ep in eps:
            col = alfworld_type(_info_value(ep, "task_type"))
            if col is None:
                raise ResultsError(
                    f"ALFWorld episode ({describe(ep)}) has no recognisable info['task_type'] "
                    f"(got {_info_value(ep, 'task_type')!r})"
                )
            by_type[col].append(float(ep.success))
        out = {c: _pct(v) for c, v in by_type.items() if v}
        out["All"] = _pct([float(ep.success) for ep in eps])
        return out
    if fam == "WebShop":
        return {
            "Score": _pct([_final(ep, "task_score") for ep in eps]),
            "Succ.": _pct([float(ep.success) for ep in eps]),
        }
    if fam == "HotpotQA":
        return {"EM": _pct([_final(ep, "em") for ep in eps]), "F1": _pct([_final(ep, "f1") for ep in eps])}
    mean_return = sum(ep.total_return for ep in eps) / len(eps) if eps else 0.0
    return {"Success": _pct([float(ep.success) for ep in eps]), "Return": round(mean_return, DECIMALS)}


def results_by_env(episodes: Iterable[Episode]) -> dict[str, dict[str, float]]:
    """:func:`env_results` for every env id among ``episodes``."""
    groups: dict[str, list[Episode]] = {}
    for ep in episodes:
        groups.setdefault(ep.env_id, []).append(ep)
    return {env_id: env_results(env_id, eps) for env_id, eps in groups.items()}


def compare(
    claimed: Mapping[str, Any], recomputed: Mapping[str, float], tolerance: float = TOLERANCE
) -> list[tuple[str, str]]:
    """Differences between claimed and recomputed columns as ``(column, message)`` pairs."""
    out: list[tuple[str, str]] = []
    for col, value in recomputed.items():
        if col not in claimed:
            out.append((col, f"missing; recomputed from the logs: {value}"))
            continue
        got = claimed[col]
        if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(float(got)):
            out.append((col, f"claimed {got!r} is not a number; recomputed from the logs: {value}"))
        elif abs(float(got) - value) > tolerance:
            out.append((col, f"claimed {got}, recomputed from the logs {value}"))
    for col in claimed:
        if col not in recomputed:
            out.append((col, "is not a column of this env (or has no episodes)"))
    return out


def mean_std(runs: Sequence[Mapping[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Per-column mean and sample std (ddof 1, as the papers' ± over 3 seeds; 0 for one run)."""
    cols = list(dict.fromkeys(c for r in runs for c in r))
    mean: dict[str, float] = {}
    std: dict[str, float] = {}
    for c in cols:
        vals = [float(r[c]) for r in runs if c in r]
        m = sum(vals) / len(vals)
        var = sum((v - m) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else 0.0
        mean[c] = round(m, DECIMALS)
        std[c] = round(math.sqrt(var), DECIMALS)
    return mean, std
