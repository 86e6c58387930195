"""The old-policy log-prob pass is skipped only where the HF sampler's log-probs are the same numbers.

One iteration (verl-agent's order) scores the rollout with the policy before updating it; with the HF engine
in fp32 over the full tempered softmax, the sampler computed those very log-probs while generating. These
tests show the maths unchanged: the sampler's log-probs equal the recomputed ones to float rounding, and
training from them ends at the same parameters and metrics.
"""

from __future__ import annotations

import pytest
import torch

from agentgym.rl.testing import one_thread, param_vector
from agentgym.rl.trainer import Trainer
from baselines import grpo

ENV = "agentgym/FrozenLakeNotSlippery-v0"


def args(tmp_path, name: str, **kw) -> grpo.Args:
    base = dict(
        model="tiny",
        env_id=ENV,
        output_dir=str(tmp_path),
        exp_name=name,
        num_tasks=2,
        group_size=2,
        max_turns=3,
        max_new_tokens=12,
        total_iterations=2,
        learning_rate=1e-3,
        micro_batch_size=4,
        mini_batch_size=0,
        beta=0.0,
        progress=False,
        plot=False,
        save_every=0,
    )
    base.update(kw)
    return grpo.Args(**base)


def test_sampler_logprobs_equal_the_recomputed_old_logprobs(tmp_path):
    with one_thread():
        t = Trainer(args(tmp_path, "a"), algo="grpo")
        assert t.sampling_logps_are_old
        rb = t.collect(t.next_tasks(), seed=3)
        batch = t.make_batch(rb)
        assert "sampling_per_token_logps" in batch
        t.args.reuse_sampling_logprobs = False  # the old pass, as it ran before
        t.score(batch)
    mask = batch["completion_mask"].bool()
    assert mask.sum() > 20
    gap = (batch["sampling_per_token_logps"] - batch["old_per_token_logps"]).abs()[mask]
    assert float(gap.max()) < 1e-5, float(gap.max())


def test_training_from_the_sampler_logprobs_ends_where_the_old_pass_does(tmp_path):
    runs = {}
    calls = {}
    for reuse in (True, False):
        a = args(tmp_path, f"reuse_{reuse}", reuse_sampling_logprobs=reuse)
        with one_thread():
            t = Trainer(a, algo="grpo")
            forward, n = t.forward, []
            t.forward = lambda mb, _f=forward, _n=n, **kw: (_n.append(torch.is_grad_enabled()), _f(mb, **kw))[1]
            metrics = t.fit(grpo.compute_advantages, grpo.policy_loss)
        runs[reuse] = (param_vector(t.model), metrics)
        calls[reuse] = n
    (p_new, m_new), (p_old, m_old) = runs[True], runs[False]
    assert calls[True].count(False) == 0 < calls[False].count(False)  # no-grad policy forwards: the old pass
    assert calls[True].count(True) == calls[False].count(True)  # the same training forwards
    torch.testing.assert_close(p_new, p_old, rtol=0, atol=1e-6)
    with one_thread():
        start = param_vector(Trainer(args(tmp_path, "init"), algo="grpo").model)
    assert float((p_new - p_old).abs().max()) < 1e-3 * float((p_old - start).abs().max())  # training moved them
    for k in ("charts/success_rate", "charts/episodic_return", "rollout/response_length"):
        assert m_new[k] == m_old[k]
    assert m_new["losses/policy_loss"] == pytest.approx(m_old["losses/policy_loss"], abs=1e-6)


def test_methods_that_rewrite_rows_or_need_readouts_keep_the_old_pass(tmp_path):
    with one_thread():
        assert not Trainer(args(tmp_path, "p", top_p=0.9), algo="grpo").sampling_logps_are_old
        assert not Trainer(args(tmp_path, "r", reuse_sampling_logprobs=False), algo="grpo").sampling_logps_are_old

        class Rewrites(Trainer):
            def training_batch(self, collected):
                return super().training_batch(collected)

        assert not Rewrites(args(tmp_path, "w"), algo="grpo").sampling_logps_are_old
