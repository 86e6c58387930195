"""Training rewards from env rewards, as the verl-agent / GiGPO / SAPO papers shape them.

* ALFWorld and WebShop: the reward of a step is ``10 x success`` (the env's own reward is not used), so an
  episode earns 10 when it solves its task (verl-agent ``alfworld``/``webshop`` env managers).
* Every other env: its own reward.
* A turn whose output could not be parsed into an action (``format_valid`` False) loses ``invalid_penalty``
  (verl-agent's invalid-action penalty, 0.1); with ``penalty_on="format+env"`` (ours, the default) so does a
  well-formed action the env rejected (``is_action_valid`` False). verl-agent's projection functions
  (``agent_system/environments/env_package/*/projection.py``) mark only format errors invalid; an
  inadmissible command is a wasted turn there (``penalty_on="format"``, the table configs).
* Group-relative methods in verl-agent score each turn *row* by its episode's reward minus that turn's
  penalty (:func:`step_row_scores`): the episode manager writes the episode reward on every step's last
  response token, then ``apply_invalid_action_penalty`` subtracts 0.1 where that step's action was invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentgym.core import env_family

#: Env families whose papers train on ``success_scale x success`` instead of the raw env reward.
SUCCESS_REWARD_FAMILIES: tuple[str, ...] = ("ALFWorld", "WebShop")


#: ``reward`` values (``agentgym.rl.config.Args.reward``)
REWARDS = ("paper", "success", "env")


def success_scale_for(env_id: str, reward: str = "paper", success_reward: float = 10.0) -> float | None:
    """The success reward ``reward`` trains ``env_id`` on, or None for the env's own reward.

    ``paper``: ``success_reward`` for ALFWorld/WebShop ids, None for others; ``success``: ``success_reward``;
    ``env``: None.
    """
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}: use one of {', '.join(REWARDS)}")
    if reward == "env" or (reward == "paper" and env_family(env_id) not in SUCCESS_REWARD_FAMILIES):
        return None
    return success_reward


def shaped_reward(
    reward: float,
    info: Mapping[str, Any],
    *,
    valid: bool,
    success_scale: float | None = None,
    invalid_penalty: float = 0.1,
) -> float:
    """The training reward of one step.

    Args:
        reward: the env's reward of the step.
        info: the step's info (``success`` is read when ``success_scale`` is set).
        valid: the output parsed into an action and the env accepted it.
        success_scale: when set, the reward is ``success_scale * info["success"]``.
        invalid_penalty: subtracted when ``valid`` is False.
    """
    r = float(success_scale) * float(bool(info.get("success", False))) if success_scale is not None else float(reward)
    if not valid:
        r -= invalid_penalty
    return r


#: ``invalid_penalty_on`` values: verl-agent's (format errors only) and ours (format errors and rejected actions).
PENALTY_ON = ("format", "format+env")


def penalised(turn: Any, penalty_on: str = "format+env") -> bool:
    """Whether ``turn`` loses the invalid-action penalty under ``penalty_on`` (one of :data:`PENALTY_ON`)."""
    if penalty_on not in PENALTY_ON:
        raise ValueError(
            f"unknown invalid_penalty_on {penalty_on!r}: use 'format' (verl-agent) or 'format+env' (ours)"
        )
    if penalty_on == "format":
        return not turn.format_valid
    return not (turn.format_valid and turn.is_action_valid)


def turn_rewards(
    turns: list[Any],
    env_id: str,
    *,
    invalid_penalty: float = 0.1,
    reward: str = "paper",
    success_reward: float = 10.0,
    penalty_on: str = "format+env",
):
    """Shaped rewards of rollout turns (``agentgym.rl.rollout.Turn``), in order.

    Args:
        reward, success_reward: which reward a turn earns (:func:`success_scale_for`).
        penalty_on: which turns are penalised (:func:`penalised`).
    """
    scale = success_scale_for(env_id, reward, success_reward)
    return [
        shaped_reward(
            t.reward,
            t.info,
            valid=not penalised(t, penalty_on),
            success_scale=scale,
            invalid_penalty=invalid_penalty,
        )
        for t in turns
    ]


def step_row_scores(meta: list[Mapping[str, Any]], invalid_penalty: float) -> list[float]:
    """verl-agent's score of each turn row: episode reward minus this turn's invalid-action penalty.

    The episode reward is the sum of the episode's unpenalised turn rewards (``10 x success`` on ALFWorld and
    WebShop); penalties are not summed over the episode, each row carries only its own.

    Args:
        meta: one mapping per turn row (``agentgym.rl.trainer.Trainer.make_batch``), with ``episode``, the
            shaped ``reward`` (already penalised when the turn was invalid) and ``penalty`` (or ``valid``).
        invalid_penalty: the penalty the shaped rewards were built with (``Args.invalid_penalty``).
    """
    penalty = turn_penalties(meta, invalid_penalty)
    episode_reward: dict[int, float] = {}
    for m, p in zip(meta, penalty):
        episode_reward[m["episode"]] = episode_reward.get(m["episode"], 0.0) + float(m["reward"]) + p
    return [episode_reward[m["episode"]] - p for m, p in zip(meta, penalty)]


def turn_penalties(meta: list[Mapping[str, Any]], invalid_penalty: float) -> list[float]:
    """The penalty each turn row's shaped reward carries: ``meta["penalty"]``, else from ``meta["valid"]``."""
    return [float(m["penalty"]) if "penalty" in m else (0.0 if m["valid"] else float(invalid_penalty)) for m in meta]
