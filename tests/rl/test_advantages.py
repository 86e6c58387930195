"""Advantage primitives against hand-computed values: group normalisation over any grouping."""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.advantages import flat_group_fraction, group_members, group_normalize, normalize_contiguous_groups

# verl-agent row scores of one task group: episode reward (10 / 0) minus each turn's own penalty
GROUP_ROW_SCORES = [9.9, 10.0, 10.0, 0.0, -0.1]


def test_group_members_keep_first_seen_order():
    assert group_members(["b", "a", "b", ("x", 1)]) == {"b": [0, 2], "a": [1], ("x", 1): [3]}


def test_group_normalize_uses_all_rows_of_the_group():
    s = torch.tensor(GROUP_ROW_SCORES)
    adv = group_normalize(s, [0] * 5)
    torch.testing.assert_close(adv, (s - s.mean()) / (s.std() + 1e-6))
    # groups do not mix; a group with one row: mean 0, std 1 (verl-agent)
    torch.testing.assert_close(
        group_normalize(torch.tensor([3.0, 1.0, 2.0]), [0, 1, 1])[0], torch.tensor(3.0 / 1.000001)
    )
    torch.testing.assert_close(
        group_normalize(torch.tensor([3.0, 1.0, 2.0]), [0, 1, 1], norm_by_std=False), torch.tensor([3.0, -0.5, 0.5])
    )


def test_group_normalize_singleton_of_its_own_mean_gets_zero():
    adv = group_normalize(torch.tensor([3.0, 1.0, 2.0]), [0, 1, 1], singleton_mean_zero=False)
    assert float(adv[0]) == 0.0
    assert float(group_normalize(torch.tensor([3.0]), [0], norm_by_std=False, singleton_mean_zero=False)[0]) == 0.0


def test_normalize_contiguous_groups_matches_hand_computation():
    returns = torch.tensor([1.0, 0.0, 0.0, 1.0, 10.0, 10.0, 10.0, 10.0])
    adv = normalize_contiguous_groups(returns, 4)
    s = (1 / 3) ** 0.5  # group 0: mean 0.5, unbiased std sqrt(1/3); group 1: all equal -> 0
    expected = torch.tensor([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        normalize_contiguous_groups(returns, 4, norm_by_std=False),
        returns.view(2, 4).sub(torch.tensor([[0.5], [10.0]])).view(-1),
    )
    assert normalize_contiguous_groups(torch.tensor([3.0, -1.0]), 1).tolist() == [0.0, 0.0]  # groups of one


def test_contiguous_groups_are_group_normalize_with_episode_labels():
    # the same statistics; only the order of the batched sums may move the last bit
    gen = torch.Generator().manual_seed(0)
    r = torch.randn(16 * 4, generator=gen) * 7
    labels = [e // 4 for e in range(64)]
    torch.testing.assert_close(
        normalize_contiguous_groups(r, 4), group_normalize(r, labels, singleton_mean_zero=False), rtol=1e-6, atol=1e-6
    )


def test_flat_group_fraction():
    assert flat_group_fraction(torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0, 2.0]), 2) == pytest.approx(2 / 3)
