"""Loss primitives against hand-computed values: PPO-clip (and dual clip), k3 KL, verl's loss aggregation,
micro-batch normalisers, the clipped value loss, the KL/entropy terms and the SFT NLL."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from agentgym.rl.batch import build_batch
from agentgym.rl.losses import (
    add_kl_entropy,
    agg_loss,
    clipped_policy_loss,
    clipped_value_loss,
    dual_clip,
    episode_returns,
    loss_counts,
    loss_normalizer,
    low_var_kl,
    masked_sum,
    micro_batch_scale,
    ppo_clip_loss,
    scale_stats,
    sft_loss,
)


def test_masked_sum_ignores_masked_out_nans():
    values = torch.tensor([[1.0, float("nan")], [2.0, 3.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    assert float(masked_sum(values, mask)) == 6.0


def test_agg_loss_modes_hand_values():
    loss = torch.tensor([[1.0, 3.0, 9.0], [2.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # the last row has no token
    assert float(agg_loss(loss, mask)) == pytest.approx(6.0 / 3)
    assert float(agg_loss(loss, mask, "seq-mean-token-sum")) == pytest.approx((4.0 + 2.0) / 2)
    assert float(agg_loss(loss, mask, "seq-mean-token-mean")) == pytest.approx((2.0 + 2.0) / 2)
    # a normaliser (the mini-batch's count) replaces this call's own
    assert float(agg_loss(loss, mask, normalizer=12.0)) == pytest.approx(0.5)
    assert float(agg_loss(loss, mask, "seq-mean-token-sum", normalizer=4.0)) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="loss_agg_mode"):
        agg_loss(loss, mask, "token-sum")


def test_loss_counts_mini_batch_vs_micro_batch():
    mini = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    micro = mini[:2]
    assert loss_counts(mini, micro, 2) == (6.0, 4.0)
    assert loss_counts(mini, micro, 2, "micro-batch") == (3.0 * 2, 2.0 * 2)
    with pytest.raises(ValueError, match="loss_norm"):
        loss_counts(mini, micro, 2, "batch")


def test_loss_normalizer_counts_tokens_or_rows():
    assert loss_normalizer(SimpleNamespace(loss_agg_mode="token-mean"), 10.0, 3.0) == 10.0
    assert loss_normalizer(SimpleNamespace(loss_agg_mode="seq-mean-token-sum"), 10.0, 3.0) == 3.0


def test_micro_batch_scale_and_scale_stats():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert micro_batch_scale(12.0, mask) == 4.0  # 3 own tokens of 12 in the mini-batch
    assert micro_batch_scale(4.0, mask, "seq-mean-token-sum") == 2.0  # 2 rows with a token
    assert micro_batch_scale(5.0, torch.zeros(1, 2)) == 5.0  # no token: divide by 1, never 0
    stats = {"losses/policy_loss": torch.tensor(1.0), "losses/clipfrac": torch.tensor(0.5)}
    assert scale_stats(stats, 3.0) == {"losses/policy_loss": torch.tensor(3.0), "losses/clipfrac": torch.tensor(0.5)}


def test_add_kl_entropy_adds_each_term_only_when_its_coefficient_is_positive():
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    mb = {"ref_per_token_logps": torch.log(torch.tensor([[0.25, 0.25]]))}
    out = {"per_token_logps": logp, "entropy": torch.tensor([[1.0, 3.0]])}
    mask = torch.ones(1, 2)
    a = SimpleNamespace(beta=0.1, entropy_coef=0.01, loss_agg_mode="token-mean")
    result = {}
    loss = add_kl_entropy(a, torch.tensor(1.0), result, out, mb, mask, 2.0)
    kl = (0.5 - torch.log(torch.tensor(0.5)) - 1.0) / 2  # k3 of token 0 (ref/pi = 0.5); token 1 is 0
    torch.testing.assert_close(result["losses/kl_ref"], kl)
    torch.testing.assert_close(result["losses/entropy"], torch.tensor(2.0))
    torch.testing.assert_close(loss, 1.0 + 0.1 * kl - 0.01 * 2.0)
    result = {}
    a = SimpleNamespace(beta=0.0, entropy_coef=0.0, loss_agg_mode="token-mean")
    assert float(add_kl_entropy(a, torch.tensor(1.0), result, {"per_token_logps": logp}, {}, mask, 2.0)) == 1.0
    assert result == {}


def test_sft_loss_is_the_token_mean_nll_and_reports_the_own_mean():
    logp = torch.tensor([[-1.0, -3.0], [-2.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, stats = sft_loss(logp, mask, 6.0)  # 3 own tokens of 6 in the mini-batch
    torch.testing.assert_close(loss, torch.tensor(6.0 / 6.0))
    torch.testing.assert_close(stats["losses/sft_loss"], torch.tensor(2.0))


def test_episode_returns_sum_the_shaped_turn_rewards():
    meta = [{"episode": 0, "reward": -0.1}, {"episode": 0, "reward": 10.0}, {"episode": 1, "reward": -0.1}]
    batch = build_batch([[1]] * 3, [[2]] * 3, pad_id=0, meta=meta)
    assert episode_returns(batch) == pytest.approx({0: 9.9, 1: -0.1})


def test_low_var_kl_hand_values():
    logp = torch.tensor([[-1.0, -2.0, -0.5]])
    ref = torch.tensor([[-1.0, -1.0, -30.0]])
    kl = low_var_kl(logp, ref)
    d = torch.tensor([0.0, 1.0, -20.0])  # ref - logp, clamped to [-20, 20]
    expected = (torch.exp(d) - d - 1).clamp(-10, 10)
    torch.testing.assert_close(kl[0], expected)
    assert float(kl[0, 1]) == pytest.approx(torch.e - 2)
    assert float(kl[0, 2]) == 10.0  # clamped like verl's low_var_kl


def test_ppo_clip_loss_hand_values():
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 2.0]]))  # with old = 0 the ratios are these numbers
    old = torch.zeros(1, 4)
    adv = torch.tensor([[1.0, -1.0, 1.0, 3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, stats = ppo_clip_loss(logp, old, adv, mask, epsilon_low=0.2, epsilon_high=0.2)
    # token 0: min(1.5, 1.2) * 1 -> 1.2; token 1: A<0: max(-0.5*-1 ... ) -> -min(-0.5, -0.8) = 0.8; token 2: 1.1
    expected = -(1.2 + (-0.8) + 1.1) / 3
    assert float(loss) == pytest.approx(expected, abs=1e-5)
    assert float(stats["clipfrac"]) == pytest.approx(2 / 3)
    # normalizer: the same sum divided by a bigger token count (gradient accumulation)
    loss2, _ = ppo_clip_loss(logp, old, adv, mask, normalizer=6.0)
    assert float(loss2) == pytest.approx(expected / 2, abs=1e-5)


def test_clipped_value_loss_hand_values():
    values = torch.tensor([[2.0, 0.0]])
    old = torch.tensor([[0.0, 0.0]])
    ret = torch.tensor([[1.0, 1.0]])
    mask = torch.tensor([[1.0, 1.0]])
    loss, frac = clipped_value_loss(values, old, ret, mask, clip=0.5)
    # token 0: unclipped (2-1)^2 = 1, clipped (0.5-1)^2 = .25 -> 1; token 1: (0-1)^2 = 1 both -> 1
    torch.testing.assert_close(loss, torch.tensor(0.5))
    assert float(frac) == 0.0
    values = torch.tensor([[1.0, 0.0]])  # clipped to 0.5: (0.5 - 2)^2 = 2.25 > (1 - 2)^2 = 1
    loss, frac = clipped_value_loss(values, old, torch.tensor([[2.0, 0.0]]), mask, clip=0.5)
    torch.testing.assert_close(loss, torch.tensor(0.5 * (2.25 + 0.0) / 2))
    assert float(frac) == 0.5


def test_dual_clip_caps_negative_advantage_tokens_at_c():
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


def test_clipped_policy_loss_reads_the_configs_clip_ratio_c():
    class A:
        epsilon_low = epsilon_high = 0.2
        loss_agg_mode = "token-mean"
        clip_ratio_c = 3.0

    mb = {"old_per_token_logps": torch.zeros(1, 1), "advantages": torch.tensor([[-1.0]])}
    loss, stats = clipped_policy_loss(A, torch.log(torch.tensor([[10.0]])), mb, torch.ones(1, 1), 1.0)
    torch.testing.assert_close(loss, torch.tensor(3.0))
    A.clip_ratio_c = None
    loss, _ = clipped_policy_loss(A, torch.log(torch.tensor([[10.0]])), mb, torch.ones(1, 1), 1.0)
    torch.testing.assert_close(loss, torch.tensor(10.0))
