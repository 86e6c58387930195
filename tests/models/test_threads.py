"""The thread policy: --threads, then OMP_NUM_THREADS, then the physical cores other work leaves idle."""

from __future__ import annotations

import pytest
import torch

from agentgym.models import threads


def test_the_policy_takes_the_idle_cores_and_at_least_one():
    assert threads.policy_threads(4, 0.2) == 4
    assert threads.policy_threads(4, 1.4) == 3
    assert threads.policy_threads(2, 1.6) == 1
    assert threads.policy_threads(2, 9.0) == 1
    assert threads.policy_threads(8, None) == 8


def test_an_explicit_choice_wins(monkeypatch):
    monkeypatch.setattr(threads, "load_average", lambda sample_s=0.25: 0.0)
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    assert threads.choose_threads(3, env={"OMP_NUM_THREADS": "1"}) == threads.ThreadChoice(3, "--threads", 4, None)
    assert threads.choose_threads(None, env={"OMP_NUM_THREADS": "2"}).threads == 2
    chosen = threads.choose_threads(None, env={})
    assert (chosen.threads, chosen.source) == (4, "policy")
    assert "threads: 4 (4 physical core(s), load 0.0" in chosen.describe()


def test_bad_values_are_one_line_errors():
    with pytest.raises(ValueError, match="positive number"):
        threads.choose_threads(-2, env={})
    with pytest.raises(ValueError, match="OMP_NUM_THREADS='two'"):
        threads.choose_threads(None, env={"OMP_NUM_THREADS": "two"})


def test_apply_sets_torch_and_prints_the_choice(capsys):
    saved = torch.get_num_threads()
    try:
        assert threads.apply_threads(1).threads == 1
        assert torch.get_num_threads() == 1
        assert capsys.readouterr().out == "threads: 1 (from --threads)\n"
    finally:
        torch.set_num_threads(saved)


def test_the_load_counts_busy_cores_now():
    load = threads.load_average(sample_s=0.05)
    assert load is not None and load >= 0
