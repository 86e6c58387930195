"""GRPO: group-normalised advantages against hand-computed values, the actor loss, smoke + exact resume."""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.batch import build_batch
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


class _StandIn:
    """A trainer for the loss functions: ``args`` and a forward of leaf tensors (the gradients land on them)."""

    def __init__(self, args, logp, entropy):
        self.args, self.logp, self.entropy = args, logp, entropy

    def forward(self, mb, *, want_entropy=False, **_):
        return {"per_token_logps": self.logp, "entropy": self.entropy}

    def critic_values(self, mb):
        return mb["values"] * 1.5


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum"])
def test_grpos_written_out_loss_equals_the_primitives_the_other_methods_compose(mode):
    """GRPO writes its loss out term by term; SAPO, ERL and SEED build the same PPO-clip + KL - entropy from
    ``clipped_policy_loss`` and ``add_kl_entropy``, and PPO's actor calls GRPO's: all three agree bit for bit."""
    from types import SimpleNamespace

    from agentgym.rl.losses import (
        add_kl_entropy,
        clipped_policy_loss,
        loss_normalizer,
        micro_batch_scale,
        scale_stats,
    )
    from baselines import ppo

    def composed(trainer, mb, n_tokens, n_rows):
        a = trainer.args
        out = trainer.forward(mb, want_entropy=a.entropy_coef > 0)
        mask, norm = mb["completion_mask"], loss_normalizer(a, n_tokens, n_rows)
        pg_loss, stats = clipped_policy_loss(a, out["per_token_logps"], mb, mask, norm)
        result = {"losses/policy_loss": pg_loss.detach(), **{f"losses/{k}": v for k, v in stats.items()}}
        loss = add_kl_entropy(a, pg_loss, result, out, mb, mask, norm)
        return loss, scale_stats(result, micro_batch_scale(norm, mask, a.loss_agg_mode))

    gen = torch.Generator().manual_seed(0)
    B, T = 4, 5
    mask = torch.ones(B, T)
    mask[1, 3:] = 0
    mb = {
        "completion_mask": mask,
        "old_per_token_logps": -torch.rand(B, T, generator=gen),
        "ref_per_token_logps": -torch.rand(B, T, generator=gen),
        "advantages": torch.randn(B, T, generator=gen),
        "values": torch.randn(B, T, generator=gen),
        "returns": torch.randn(B, T, generator=gen),
    }
    args = SimpleNamespace(
        epsilon_low=0.2, epsilon_high=0.28, clip_ratio_c=3.0, beta=0.01, entropy_coef=0.001, loss_agg_mode=mode
    )
    ppo_args = SimpleNamespace(**vars(args), value_clip=0.5, value_loss_factor=0.5, vf_coef=0.0)
    logp0, ent0 = -torch.rand(B, T, generator=gen), torch.rand(B, T, generator=gen)

    def run(loss_fn, a):
        logp, ent = logp0.clone().requires_grad_(True), ent0.clone().requires_grad_(True)
        loss, stats = loss_fn(_StandIn(a, logp, ent), mb, 17.0, 4.0)
        loss.backward()
        return loss.detach(), logp.grad, ent.grad, stats

    ref = run(grpo.policy_loss, args)
    for loss_fn, a in ((composed, args), (ppo.ppo_loss, ppo_args)):
        got = run(loss_fn, a)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1]) and torch.equal(got[2], ref[2])
        assert all(torch.equal(got[3][k], v) for k, v in ref[3].items())
