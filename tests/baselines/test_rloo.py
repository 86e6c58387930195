"""RLOO: leave-one-out advantages against hand-computed values; smoke + exact resume."""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.testing import learning_run, smoke_and_resume
from baselines import rloo
from tests.baselines.test_grpo import GROUP_META, GROUP_ROW_SCORES, _batch, _trainer


def test_rloo_row_advantages_leave_one_row_out():
    s = torch.tensor(GROUP_ROW_SCORES)
    adv = rloo.rloo_row_advantages(s, [0] * 5)
    others = torch.stack([torch.cat([s[:i], s[i + 1 :]]).mean() for i in range(5)])
    torch.testing.assert_close(adv, s - others)  # = 5/4 * (s - mean)
    batch = _batch(GROUP_META)
    rloo.compute_advantages(_trainer(episode_advantage="rows"), batch)
    torch.testing.assert_close(batch["advantages"][:, 0], s - others)
    batch = _batch(GROUP_META)
    rloo.compute_advantages(_trainer(episode_advantage="episodes"), batch)  # returns 9.9 / -0.1
    torch.testing.assert_close(batch["advantages"][:, 0], torch.tensor([10.0, 10.0, 10.0, -10.0, -10.0]))


def test_rloo_advantages_match_hand_computation():
    returns = torch.tensor([1.0, 0.0, 0.0, 1.0, 3.0, 3.0, 3.0, 7.0])
    adv = rloo.rloo_advantages(returns, 4)
    # A_i = R_i - mean of the other three
    expected = torch.tensor([1 - 1 / 3, 0 - 2 / 3, 0 - 2 / 3, 1 - 1 / 3, 3 - 13 / 3, 3 - 13 / 3, 3 - 13 / 3, 7 - 3])
    torch.testing.assert_close(adv, expected)
    # the G/(G-1) identity with GRPO's centring
    torch.testing.assert_close(adv, (returns.view(2, 4) - returns.view(2, 4).mean(1, keepdim=True)).view(-1) * 4 / 3)


def test_rloo_rejects_groups_of_one():
    with pytest.raises(ValueError, match="group_size >= 2"):
        rloo.rloo_advantages(torch.tensor([1.0, 2.0]), 1)


def test_rloo_smoke_two_iterations_and_exact_resume(tmp_path):
    smoke_and_resume(rloo, tmp_path, loss_name="policy_loss", algo="rloo")


@pytest.mark.slow
def test_rloo_learns_echo_bandit(tmp_path):
    """Tiny random model, CPU: success rises from ~1/3 to >= 0.8 (validation at temperature 0.4)."""
    out = learning_run(rloo, tmp_path, loss_name="policy_loss", algo="rloo")
    print(
        f"\nrloo: success first 3 iterations {out['start']:.2f} -> last 5 {out['end']:.2f}, validation {out['val']:.2f}"
    )
    assert out["start"] < 0.6
    assert out["val"] >= 0.8
