"""PPO: token-level GAE and whitening against hand-computed values; smoke + exact resume."""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.batch import build_batch
from agentgym.rl.testing import learning_run, smoke_and_resume
from baselines import ppo


def test_token_gae_gamma_lambda_one_is_return_minus_value():
    rewards = torch.tensor([0.0, 0.0, 1.0, 0.0, 2.0])
    values = torch.tensor([0.5, 0.2, 0.1, 0.3, 0.4])
    adv, ret = ppo.token_gae(rewards, values, 1.0, 1.0)
    togo = torch.tensor([3.0, 3.0, 3.0, 2.0, 2.0])
    torch.testing.assert_close(adv, togo - values)
    torch.testing.assert_close(ret, togo)


def test_token_gae_discounted_hand_values():
    rewards = torch.tensor([1.0, 2.0])
    values = torch.tensor([0.5, 1.0])
    adv, _ = ppo.token_gae(rewards, values, 0.9, 0.5)
    d1 = 2.0 - 1.0  # last: r + 0 - V
    d0 = 1.0 + 0.9 * 1.0 - 0.5
    torch.testing.assert_close(adv, torch.tensor([d0 + 0.9 * 0.5 * d1, d1]))


def _trainer(episode_advantage: str):
    class T:
        class args:
            gamma = 1.0
            lam = 1.0
            whiten_advantages = False
            invalid_penalty = 0.1
            mini_batch_scope = "rank"

    T.args.episode_advantage = episode_advantage
    return T


def test_ppo_advantages_run_across_the_turns_of_an_episode():
    T = _trainer("episodes")

    meta = [
        {"episode": 0, "group": 0, "t": 0, "reward": 0.0},
        {"episode": 0, "group": 0, "t": 1, "reward": 1.0},
        {"episode": 1, "group": 1, "t": 0, "reward": -0.1},
    ]
    batch = build_batch([[1], [1, 2], [3]], [[4, 5], [6], [7]], pad_id=0, meta=meta)
    batch["values"] = torch.tensor([[0.1, 0.2], [0.3, 0.0], [0.5, 0.0]])
    ppo.compute_advantages(T, batch)
    torch.testing.assert_close(batch["returns"], torch.tensor([[1.0, 1.0], [1.0, 0.0], [-0.1, 0.0]]))
    torch.testing.assert_close(batch["advantages"], torch.tensor([[0.9, 0.8], [0.7, 0.0], [-0.6, 0.0]]))


def test_ppo_row_gae_puts_the_episode_reward_minus_the_turns_own_penalty_on_each_turn():
    # verl-agent: each turn is its own GAE sequence scored with the episode reward; the invalid penalty stays per turn.
    T = _trainer("rows")
    meta = [
        {"episode": 0, "group": 0, "t": 0, "reward": -0.1, "valid": False},  # invalid first turn
        {"episode": 0, "group": 0, "t": 1, "reward": 1.0, "valid": True},  # success
        {"episode": 1, "group": 1, "t": 0, "reward": 0.0, "valid": True},
    ]
    batch = build_batch([[1], [1, 2], [3]], [[4, 5], [6], [7]], pad_id=0, meta=meta)
    batch["values"] = torch.tensor([[0.1, 0.2], [0.3, 0.0], [0.5, 0.0]])
    ppo.compute_advantages(T, batch)
    # episode reward 1.0 (penalty added back); turn 0 keeps its own -0.1: score 0.9; turn 1: 1.0; episode 1: 0.0
    torch.testing.assert_close(batch["returns"], torch.tensor([[0.9, 0.9], [1.0, 0.0], [0.0, 0.0]]))
    torch.testing.assert_close(batch["advantages"], torch.tensor([[0.8, 0.7], [0.7, 0.0], [-0.5, 0.0]]))
    # a later invalid turn: per row it costs that turn only; concatenated, it also lowers the turns before it
    meta = [
        {"episode": 0, "group": 0, "t": 0, "reward": 0.0, "valid": True},
        {"episode": 0, "group": 0, "t": 1, "reward": -0.1, "valid": False},
        {"episode": 0, "group": 0, "t": 2, "reward": 1.0, "valid": True},
    ]
    batch = build_batch([[1], [1], [1]], [[4], [5], [6]], pad_id=0, meta=meta)
    batch["values"] = torch.zeros(3, 1)
    ppo.compute_advantages(T, batch)
    torch.testing.assert_close(batch["returns"][:, 0], torch.tensor([1.0, 0.9, 1.0]))
    ppo.compute_advantages(_trainer("episodes"), batch)
    torch.testing.assert_close(batch["returns"][:, 0], torch.tensor([0.9, 0.9, 1.0]))
    T.args.episode_advantage = "turns"
    with pytest.raises(ValueError, match="episode_advantage must be"):
        ppo.compute_advantages(T, batch)


def test_masked_whiten():
    x = torch.tensor([[1.0, 3.0], [5.0, 100.0]])
    m = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    w = ppo.masked_whiten(x, m)
    torch.testing.assert_close(w, torch.tensor([[-1.0, 0.0], [1.0, 0.0]]), atol=1e-4, rtol=1e-4)


def test_ppo_smoke_two_iterations_and_exact_resume(tmp_path):
    out = smoke_and_resume(
        ppo,
        tmp_path,
        loss_name="ppo_loss",
        algo="ppo",
        trainer_kw={"critic_learning_rate": ppo.Args.critic_learning_rate},
        group_size=1,
        num_tasks=4,
    )
    assert out["metrics"]["losses/value_loss"] > 0


@pytest.mark.slow
def test_ppo_learns_echo_bandit(tmp_path):
    """Tiny random model, CPU: success rises from ~1/3 to >= 0.8 (validation at temperature 0.4)."""
    out = learning_run(
        ppo,
        tmp_path,
        loss_name="ppo_loss",
        algo="ppo",
        trainer_kw={"critic_learning_rate": ppo.Args.critic_learning_rate},
    )
    print(
        f"\nppo: success first 3 iterations {out['start']:.2f} -> last 5 {out['end']:.2f}, validation {out['val']:.2f}"
    )
    assert out["start"] < 0.6
    assert out["val"] >= 0.8
