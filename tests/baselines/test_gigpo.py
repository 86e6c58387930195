"""GiGPO: discounted step returns, anchor-state groups, w/ std and w/o std, against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.testing import learning_run, smoke_and_resume
from baselines import gigpo
from tests.baselines.test_grpo import GROUP_META, GROUP_ROW_SCORES, _batch, _trainer


def test_gigpo_episode_level_uses_verl_agent_row_scores():
    obs = ["s0", "s1", "s2", "s0", "s3"]  # rows 0 and 3 share the anchor state s0
    meta = [dict(m, observation=o) for m, o in zip(GROUP_META, obs)]
    kw = dict(mode="mean_norm", gamma=0.5, step_advantage_w=1.0, step_return="penalised")
    batch = _batch(meta)
    stats = gigpo.compute_advantages(_trainer(episode_advantage="rows", **kw), batch)
    s = torch.tensor(GROUP_ROW_SCORES)
    a_ep = s - s.mean()
    # step returns from the shaped turn rewards: episode 0 (-0.1, 0, 10) -> 2.4, 5, 10; episode 1 (0, -0.1) -> -0.05
    a_step = torch.tensor([(2.4 - -0.05) / 2, 0.0, 0.0, (-0.05 - 2.4) / 2, 0.0])
    torch.testing.assert_close(batch["advantages"][:, 0], a_ep + a_step)
    assert stats["adv/mean_step_group_size"] == pytest.approx(5 / 4)
    batch = _batch(meta)
    gigpo.compute_advantages(_trainer(episode_advantage="episodes", **kw), batch)
    a_ep_old = torch.tensor([5.0, 5.0, 5.0, -5.0, -5.0])  # returns 9.9 / -0.1 over the two episodes
    torch.testing.assert_close(batch["advantages"][:, 0], a_ep_old + a_step)


def test_discounted_step_returns():
    assert gigpo.discounted_step_returns([0.0, 0.0, 10.0], 0.95) == pytest.approx([9.025, 9.5, 10.0])
    assert gigpo.discounted_step_returns([1.0, -0.1], 0.5) == pytest.approx([0.95, -0.1])


def test_gigpo_advantages_hand_example_with_and_without_std():
    # One task, two episodes. Episode A: obs s0 -> s1 -> success (R = 10). Episode B: s0 -> s2 (R = 0).
    # Rows: A0 (s0), A1 (s1), B0 (s0). Episode returns per row: 10, 10, 0.
    ep_ret = torch.tensor([10.0, 10.0, 0.0])
    step_ret = torch.tensor([9.5, 10.0, 0.0])
    groups = [0, 0, 0]
    obs = ["s0", "s1", "s0"]
    joint, a_ep, a_step = gigpo.gigpo_advantages(ep_ret, step_ret, groups, obs, mode="mean_norm")
    # episode level over rows (verl-agent cross-steps): mean 20/3
    torch.testing.assert_close(a_ep, torch.tensor([10 - 20 / 3, 10 - 20 / 3, -20 / 3]))
    # step groups: {A0, B0} share s0 (mean 4.75); A1 alone -> 0
    torch.testing.assert_close(a_step, torch.tensor([4.75, 0.0, -4.75]))
    torch.testing.assert_close(joint, a_ep + a_step)
    joint_s, a_ep_s, a_step_s = gigpo.gigpo_advantages(
        ep_ret, step_ret, groups, obs, mode="mean_std_norm", step_advantage_w=0.5
    )
    std_ep = torch.tensor([10.0, 10.0, 0.0]).std()
    torch.testing.assert_close(a_ep_s, (ep_ret - 20 / 3) / (std_ep + 1e-6))
    std_s0 = torch.tensor([9.5, 0.0]).std()
    torch.testing.assert_close(a_step_s, torch.tensor([4.75 / (std_s0 + 1e-6), 0.0, -4.75 / (std_s0 + 1e-6)]))
    torch.testing.assert_close(joint_s, a_ep_s + 0.5 * a_step_s)


def test_gigpo_anchor_groups_do_not_cross_tasks_and_singletons():
    # same observation text in two different tasks must not be grouped; a one-episode task: mean 0, std 1
    ep_ret = torch.tensor([1.0, 3.0])
    joint, a_ep, a_step = gigpo.gigpo_advantages(
        ep_ret, torch.tensor([1.0, 3.0]), [0, 1], ["s", "s"], mode="mean_std_norm"
    )
    torch.testing.assert_close(a_ep, torch.tensor([1.0, 3.0]) / (1 + 1e-6))
    torch.testing.assert_close(a_step, torch.zeros(2))


def test_gigpo_unknown_mode():
    with pytest.raises(ValueError, match="mean_std_norm"):
        gigpo.gigpo_advantages(torch.zeros(1), torch.zeros(1), [0], ["s"], mode="std")


def test_gigpo_smoke_two_iterations_and_exact_resume(tmp_path):
    out = smoke_and_resume(gigpo, tmp_path, loss_name="policy_loss", algo="gigpo")
    assert out["metrics"]["adv/mean_step_group_size"] >= 1.0


@pytest.mark.slow
def test_gigpo_learns_echo_bandit(tmp_path):
    """Tiny random model, CPU: success rises from ~1/3 and validation (T = 0.4) reaches >= 0.8 in most of 3 seeds.

    With verl-agent's row scores (the default) seed 1 ended at 0.93 training success but 0.62 validation while
    seeds 2-4 reached 1.00 / 1.00 (measured), so one seed proves nothing either way.
    """
    vals = []
    for seed in (1, 2, 3):
        out = learning_run(gigpo, tmp_path / f"s{seed}", loss_name="policy_loss", algo="gigpo", seed=seed)
        print(
            f"\ngigpo seed {seed}: success first 3 iterations {out['start']:.2f} -> last 5 {out['end']:.2f}, "
            f"validation {out['val']:.2f}"
        )
        assert out["start"] < 0.6
        vals.append(out["val"])
    assert sum(v >= 0.8 for v in vals) >= 2, vals
