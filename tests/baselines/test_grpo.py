"""GRPO: group-normalised advantages against hand-computed values, the actor loss, smoke + exact resume."""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.batch import build_batch
from agentgym.rl.rewards import step_row_scores
from agentgym.rl.testing import learning_run, smoke_and_resume
from baselines import grpo

# One ALFWorld-like group of two episodes (shaped rewards: 10 x success, -0.1 per invalid turn).
# Episode 0: invalid turn, valid turn, success -> rewards -0.1, 0, 10. Episode 1: valid, invalid -> 0, -0.1.
GROUP_META = [
    {"episode": 0, "group": 0, "t": 0, "reward": -0.1, "valid": False},
    {"episode": 0, "group": 0, "t": 1, "reward": 0.0, "valid": True},
    {"episode": 0, "group": 0, "t": 2, "reward": 10.0, "valid": True},
    {"episode": 1, "group": 0, "t": 0, "reward": 0.0, "valid": True},
    {"episode": 1, "group": 0, "t": 1, "reward": -0.1, "valid": False},
]
# verl-agent: every row carries the episode reward (10 / 0) minus its own turn's penalty
GROUP_ROW_SCORES = [9.9, 10.0, 10.0, 0.0, -0.1]


def _trainer(**kw):
    args = type("A", (), {"group_size": 2, "norm_adv_by_std": True, "invalid_penalty": 0.1, **kw})
    return type("T", (), {"args": args})


def _batch(meta):
    return build_batch([[1, 2]] * len(meta), [[5, 6]] * len(meta), pad_id=0, meta=[dict(m) for m in meta])


def test_step_row_scores_are_episode_reward_minus_own_penalty():
    assert step_row_scores(GROUP_META, 0.1) == pytest.approx(GROUP_ROW_SCORES)
    # the old episode-level score summed penalties over the episode: 9.9 and -0.1 for every row
    assert grpo.episode_returns(_batch(GROUP_META)) == pytest.approx({0: 9.9, 1: -0.1})


def test_grpo_row_advantages_use_all_rows_of_the_group():
    s = torch.tensor(GROUP_ROW_SCORES)
    adv = grpo.row_advantages(s, [0] * 5)
    torch.testing.assert_close(adv, (s - s.mean()) / (s.std() + 1e-6))
    # a group with one row: mean 0, std 1 (verl-agent); groups do not mix
    torch.testing.assert_close(
        grpo.row_advantages(torch.tensor([3.0, 1.0, 2.0]), [0, 1, 1]).tolist()[0], 3.0 / (1 + 1e-6)
    )
    torch.testing.assert_close(
        grpo.row_advantages(torch.tensor([3.0, 1.0, 2.0]), [0, 1, 1], norm_by_std=False),
        torch.tensor([3.0, -0.5, 0.5]),
    )


def test_grpo_compute_advantages_rows_vs_episodes():
    s = torch.tensor(GROUP_ROW_SCORES)
    batch = _batch(GROUP_META)
    grpo.compute_advantages(_trainer(episode_advantage="rows"), batch)
    expected = ((s - s.mean()) / (s.std() + 1e-6)).tolist()
    torch.testing.assert_close(batch["advantages"][:, 0], torch.tensor(expected))
    # rows of one episode differ when only one of them was invalid
    assert batch["advantages"][0, 0] < batch["advantages"][1, 0]
    batch = _batch(GROUP_META)
    grpo.compute_advantages(_trainer(episode_advantage="episodes"), batch)
    a = 10.0 / (torch.tensor([9.9, -0.1]).std() + 1e-6)  # returns 9.9 / -0.1: mean 4.9
    torch.testing.assert_close(batch["advantages"][:, 0], torch.tensor([a / 2, a / 2, a / 2, -a / 2, -a / 2]))
    with pytest.raises(ValueError, match="episode_advantage"):
        grpo.compute_advantages(_trainer(episode_advantage="steps"), _batch(GROUP_META))


def test_grpo_advantages_match_hand_computation():
    returns = torch.tensor([1.0, 0.0, 0.0, 1.0, 10.0, 10.0, 10.0, 10.0])
    adv = grpo.grpo_advantages(returns, 4)
    # group 1: mean 0.5, unbiased std sqrt(1/3) = 0.57735
    s = (1 / 3) ** 0.5
    expected = torch.tensor([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=1e-5)
    # without std: centring only
    torch.testing.assert_close(
        grpo.grpo_advantages(returns, 4, norm_by_std=False),
        returns.view(2, 4).sub(torch.tensor([[0.5], [10.0]])).view(-1),
    )


def test_grpo_advantage_is_broadcast_to_every_turn_and_token_of_the_episode():
    class T:  # minimal stand-in for the trainer: only args are read
        class args:
            group_size = 2
            norm_adv_by_std = True
            episode_advantage = "episodes"

    # episode 0 has two turns (rewards 0 then 1 -> return 1), episode 1 one turn (return 0)
    meta = [
        {"episode": 0, "group": 0, "t": 0, "reward": 0.0},
        {"episode": 0, "group": 0, "t": 1, "reward": 1.0},
        {"episode": 1, "group": 0, "t": 0, "reward": 0.0},
    ]
    batch = build_batch([[1, 2], [1, 2, 3], [4]], [[5, 6, 7], [8], [9, 9]], pad_id=0, meta=meta)
    grpo.compute_advantages(T, batch)
    a = 0.5 / (0.5**0.5 + 1e-6)  # returns (1, 0): mean 0.5, std sqrt(0.5)
    expected = torch.tensor([[a, a, a], [a, 0, 0], [-a, -a, 0]])
    torch.testing.assert_close(batch["advantages"], expected, atol=1e-5, rtol=1e-5)


def test_grpo_smoke_two_iterations_and_exact_resume(tmp_path):
    out = smoke_and_resume(grpo, tmp_path, loss_name="policy_loss", algo="grpo")
    m = out["metrics"]
    for key in ("charts/success_rate", "losses/policy_loss", "losses/approx_kl", "losses/kl_ref", "time/update_s"):
        assert key in m
    assert 0.0 <= m["charts/success_rate"] <= 1.0


@pytest.mark.slow
def test_grpo_learns_echo_bandit(tmp_path):
    """Tiny random model, CPU: success rises from ~1/3 to >= 0.8 (validation at temperature 0.4)."""
    out = learning_run(grpo, tmp_path, loss_name="policy_loss", algo="grpo")
    print(
        f"\ngrpo: success first 3 iterations {out['start']:.2f} -> last 5 {out['end']:.2f}, validation {out['val']:.2f}"
    )
    assert out["start"] < 0.6
    assert out["val"] >= 0.8


def test_validation_logs_the_headline_split_and_each_extra_split(tmp_path):
    from agentgym.rl.testing import tiny_echo_args
    from agentgym.rl.trainer import Trainer

    args = tiny_echo_args(grpo.Args, tmp_path / "val", val_split="valid_seen", val_extra_splits=["valid_unseen"])
    args.val_tasks = 3
    trainer = Trainer(args, algo="grpo")
    played = []
    real_rollout = trainer.rollout

    def spy(tasks, **kw):
        played.append([t.options for t in tasks])
        return real_rollout(tasks, **kw)

    trainer.rollout = spy
    out = trainer.validate()
    assert set(out) == {"val/success_rate", "val/valid_unseen/success_rate"}
    assert all(0.0 <= v <= 1.0 for v in out.values())
    assert played == [
        [{"split": "valid_seen", "index": i} for i in range(3)],
        [{"split": "valid_unseen", "index": i} for i in range(3)],
    ]


def test_dual_clip_caps_negative_advantage_tokens_at_c():
    from agentgym.rl.losses import dual_clip, ppo_clip_loss

    # ratios 5 and 2 with A = -1: PPO-clip loss r * 1 = 5 and 2; dual clip (c = 3) caps the first at 3.
    # A = +1 with ratio 5: clipped at 1 + eps, loss -1.2, untouched by the dual clip.
    old = torch.zeros(1, 3)
    new = torch.log(torch.tensor([[5.0, 2.0, 5.0]]))
    adv = torch.tensor([[-1.0, -1.0, 1.0]])
    mask = torch.ones(1, 3)
    plain, _ = ppo_clip_loss(new, old, adv, mask)
    torch.testing.assert_close(plain, torch.tensor((5.0 + 2.0 - 1.2) / 3))
    dual, stats = ppo_clip_loss(new, old, adv, mask, clip_ratio_c=3.0)
    torch.testing.assert_close(dual, torch.tensor((3.0 + 2.0 - 1.2) / 3))
    torch.testing.assert_close(stats["clipfrac_lower"], torch.tensor(1 / 3))
    # the capped token passes no gradient (its loss is the constant -c A)
    new.requires_grad_(True)
    ppo_clip_loss(new, old, adv, mask, clip_ratio_c=3.0)[0].backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] != 0
    torch.testing.assert_close(
        dual_clip(torch.tensor([4.0, -2.0]), torch.tensor([-1.0, 2.0]), 3.0), torch.tensor([3.0, -2.0])
    )
    with pytest.raises(ValueError, match="clip_ratio_c"):
        dual_clip(torch.zeros(1), torch.zeros(1), 1.0)


def test_table_clip_ratio_c_reaches_the_policy_loss():
    class A:
        epsilon_low = epsilon_high = 0.2
        clip_ratio_c = 3.0

    mb = {"old_per_token_logps": torch.zeros(1, 1), "advantages": torch.tensor([[-1.0]])}
    loss, stats = grpo.clipped_policy_loss(A, torch.log(torch.tensor([[10.0]])), mb, torch.ones(1, 1), 1.0)
    torch.testing.assert_close(loss, torch.tensor(3.0))
    A.clip_ratio_c = None
    loss, _ = grpo.clipped_policy_loss(A, torch.log(torch.tensor([[10.0]])), mb, torch.ones(1, 1), 1.0)
    torch.testing.assert_close(loss, torch.tensor(10.0))
