"""SAPO: read-out positions, reserved tokens never sampled and excluded, lambda-return targets, batch norm."""

from __future__ import annotations

import pytest
import torch

from agentgym.models.generation import HFGenerator
from agentgym.models.tiny import make_tiny_model
from agentgym.rl.batch import build_batch
from agentgym.rl.logprobs import forward_completion
from agentgym.rl.testing import learning_run, smoke_and_resume, tiny_echo_args
from agentgym.rl.trainer import Trainer
from baselines import sapo


def test_readouts_are_taken_at_state_end_and_action_end():
    # readout (B=2, T+1=4, 2): row 0 has a 3-token response, row 1 a 1-token response
    ro = torch.zeros(2, 4, 2)
    ro[0, 0] = torch.tensor([1.0, 0.0])  # state end of row 0: gap 1
    ro[0, 3] = torch.tensor([0.0, 2.0])  # action end of row 0 (column 3): gap -2
    ro[1, 0] = torch.tensor([50.0, 0.0])  # saturates at +1
    ro[1, 1] = torch.tensor([0.5, 0.0])  # action end of row 1 (column 1)
    ro[0, 1] = ro[0, 2] = torch.tensor([9.0, -9.0])  # in-between columns must not be used
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    v, q = sapo.state_action_readouts(ro, mask, tau_v=2.0, r_max=10.0)
    torch.testing.assert_close(v, torch.tensor([5.0, 10.0]))
    torch.testing.assert_close(q, torch.tensor([-10.0, 2.5]))


def test_forward_readout_columns_match_model_logits_at_those_positions():
    model, tok = make_tiny_model(None)
    prompts, responses = [[5, 6, 7, 8], [9, 10]], [[11, 12, 13], [14]]
    b = build_batch(prompts, responses, pad_id=tok.pad_token_id)
    ids = [2, 3]
    with torch.no_grad():
        out = forward_completion(model, b["input_ids"], b["attention_mask"], 3, readout_token_ids=ids)
        for i, (p, r) in enumerate(zip(prompts, responses)):
            logits = model(torch.tensor([p + r])).logits[0]  # unpadded row
            torch.testing.assert_close(
                out["readout"][i, 0], logits[len(p) - 1, ids], atol=1e-4, rtol=1e-4
            )  # state end
            torch.testing.assert_close(
                out["readout"][i, len(r)], logits[len(p) + len(r) - 1, ids], atol=1e-4, rtol=1e-4
            )


def test_lambda_return_targets_with_terminal_and_invalid_turns():
    # 3 turns; turn 1 invalid; the last turn terminal. gamma 0.9, lambda 0.5, c_inv 0.1
    r = [0.0, -0.1, 10.0]
    d = [False, False, True]
    v = [1.0, 2.0, 4.0]
    q = [1.5, 3.0, 5.0]
    inv = [False, True, False]
    adv, pen, y_v, y_q = sapo.sapo_turn_targets(r, d, v, q, inv, gamma=0.9, lam=0.5, invalid_coef=0.1)
    d2 = 10.0 - 4.0  # terminal: no bootstrap
    d1 = -0.1 + 0.9 * 4.0 - 2.0
    d0 = 0.0 + 0.9 * 2.0 - 1.0
    a2 = d2
    a1 = d1 + 0.45 * a2
    a0 = d0 + 0.45 * a1
    assert adv == pytest.approx([a0, a1, a2])
    assert pen == pytest.approx([a0, a1 - 0.1, a2])
    assert y_v == pytest.approx([1.0 + a0, 2.0 + a1, 4.0 + a2])
    assert y_q == pytest.approx([0.0 + 0.9 * 3.0, -0.1 + 0.9 * 5.0, 10.0])


def test_done_stops_the_recursion_inside_a_list():
    # two episodes concatenated would be wrong; a done in the middle must cut bootstrapping and the A chain
    adv, _, _, y_q = sapo.sapo_turn_targets(
        [1.0, 2.0], [True, True], [0.5, 0.5], [0.0, 9.0], [False, False], gamma=1.0, lam=1.0, invalid_coef=0.0
    )
    assert adv == pytest.approx([0.5, 1.5])
    assert y_q == pytest.approx([1.0, 2.0])


def test_an_invalid_turn_is_penalised_once_by_default(tmp_path):
    """The reward carries invalid_penalty; the default c_inv = 0 adds nothing on top; both at once are refused."""
    args = sapo.Args()
    assert args.invalid_penalty == 0.1 and args.invalid_coef == 0.0

    class T:
        pass

    T.args = args
    meta = [
        {"episode": 0, "group": 0, "t": 0, "reward": -0.1, "valid": False, "done": False},
        {"episode": 0, "group": 0, "t": 1, "reward": 1.0, "valid": True, "done": True},
        {"episode": 1, "group": 1, "t": 0, "reward": 0.0, "valid": True, "done": False},
    ]
    batch = build_batch([[1], [1], [2]], [[4], [5], [6]], pad_id=0, meta=meta)
    batch["readout"] = torch.zeros(3, 2, 2)  # V = Q = 0 everywhere
    sapo.compute_advantages(T, batch)
    # with V = 0 the penalised advantages are the lambda-returns of the shaped rewards only
    g, lam = args.gamma, args.lam
    raw = torch.tensor([-0.1 + g * lam * 1.0, 1.0, 0.0])
    torch.testing.assert_close(batch["advantages"][:, 0], sapo.batch_normalize(raw, args.adv_eps))
    T.args = sapo.Args(invalid_coef=0.1)
    with pytest.raises(ValueError, match="keep one"):
        sapo.compute_advantages(T, batch)
    T.args = sapo.Args(invalid_coef=0.1, invalid_penalty=0.0)
    sapo.compute_advantages(T, batch)  # the paper's advantage form alone is allowed


def test_value_losses_train_the_unclipped_readout():
    """A saturated read-out (gap > tau_v) still gets a gradient towards its target (clip() would give none)."""
    ro = torch.tensor([[[12.0, 0.0], [12.0, 0.0]]], requires_grad=True)  # gap 12 > tau_v 5: saturated
    mask = torch.tensor([[1.0]])
    v_clip, _ = sapo.state_action_readouts(ro, mask, 5.0, 1.0)
    v_raw, _ = sapo.state_action_readouts(ro, mask, 5.0, 1.0, clip=False)
    assert float(v_clip.detach()) == 1.0 and float(v_raw.detach()) == pytest.approx(2.4)
    (g_clip,) = torch.autograd.grad((v_clip - 0.0).pow(2).sum(), ro)
    (g_raw,) = torch.autograd.grad((v_raw - 0.0).pow(2).sum(), ro)
    assert float(g_clip.abs().sum()) == 0.0 and float(g_raw[0, 0, 0]) > 0
    assert sapo.Args().train_raw_readout


def test_batch_normalisation():
    x = torch.tensor([1.0, 2.0, 3.0, 6.0])
    out = sapo.batch_normalize(x, 1e-6)
    torch.testing.assert_close(out, (x - 3.0) / (x.std() + 1e-6))
    assert abs(float(out.mean())) < 1e-6


def test_reserved_tokens_are_never_sampled_and_excluded_from_logprobs_and_entropy(tmp_path):
    args = tiny_echo_args(sapo.Args, tmp_path / "r", restrict_vocab=[], max_new_tokens=8)
    trainer = Trainer(args, algo="sapo", reserved_tokens=[sapo.W_PLUS, sapo.W_MINUS])
    wp, wm = trainer.reserved_ids
    assert wp != wm and set(trainer.reserved_ids) <= set(trainer.exclude_ids)
    head = trainer.model.get_output_embeddings()
    with torch.no_grad():  # make w+/w- by far the most likely tokens if they were not masked
        head.weight[wp] = head.weight[wm] = 0.0
        if getattr(head, "bias", None) is not None:
            head.bias[wp] = head.bias[wm] = 1e4
        else:
            head.weight[wp] = head.weight[wm] = head.weight.abs().max() * 1e3 * torch.sign(head.weight.sum(0))
    gen = HFGenerator(trainer.model, trainer.tokenizer)
    outs = gen.generate([[5, 6, 7]] * 16, max_new_tokens=8, suppress_token_ids=trainer.exclude_ids, seed=0)
    assert all(wp not in o.ids and wm not in o.ids for o in outs)
    b = build_batch([[5, 6, 7]], [[11, 12]], pad_id=trainer.tokenizer.pad_token_id)
    with torch.no_grad():
        masked = trainer.forward(b, want_entropy=True)
        plain = forward_completion(trainer.model, b["input_ids"], b["attention_mask"], 2, want_entropy=True)
        logits = trainer.model(b["input_ids"]).logits[0, 2:4].float()
    logits[:, [wp, wm]] = float("-inf")
    ref_lp = torch.log_softmax(logits, -1)[[0, 1], [11, 12]]
    torch.testing.assert_close(masked["per_token_logps"][0], ref_lp, atol=1e-4, rtol=1e-4)
    p = torch.softmax(logits, -1)
    ref_ent = -(p * torch.where(p > 0, torch.log_softmax(logits, -1), torch.zeros_like(p))).sum(-1)
    torch.testing.assert_close(masked["entropy"][0], ref_ent, atol=1e-4, rtol=1e-4)
    assert not torch.allclose(plain["per_token_logps"], masked["per_token_logps"])  # w+/w- really carried mass


def test_sapo_smoke_two_iterations_and_exact_resume(tmp_path):
    out = smoke_and_resume(
        sapo,
        tmp_path,
        loss_name="sapo_loss",
        algo="sapo",
        trainer_kw={"reserved_tokens": [sapo.W_PLUS, sapo.W_MINUS]},
        group_size=1,
        num_tasks=4,
        r_max=1.0,
    )
    m = out["metrics"]
    assert m["losses/value_loss"] >= 0 and "losses/q_loss" in m and "sapo/value_return_corr" in m
    assert {"sapo/value_return_ev", "sapo/q_return_corr", "sapo/q_return_ev"} <= set(m)


@pytest.mark.slow
def test_sapo_learns_echo_bandit(tmp_path):
    """Tiny random model, CPU: success rises from ~1/3 to >= 0.8 (validation at temperature 0.4)."""
    out = learning_run(
        sapo, tmp_path, loss_name="sapo_loss", algo="sapo", trainer_kw={"reserved_tokens": [sapo.W_PLUS, sapo.W_MINUS]}
    )
    print(
        f"\nsapo: success first 3 iterations {out['start']:.2f} -> last 5 {out['end']:.2f}, validation {out['val']:.2f}"
    )
    last = out["history"][-5:]
    corr = [r["sapo/value_return_corr"] for r in last]
    print(f"sapo: corr(V_old(s_t), discounted return from t), last 5 iterations: {[round(c, 2) for c in corr]}")
    v_mean = sum(r["sapo/v_mean"] for r in last) / 5
    print(f"sapo: mean read-out V over the last 5 iterations {v_mean:.2f}, training success {out['end']:.2f}")
    assert out["start"] < 0.6
    assert out["val"] >= 0.8
    # The read-out has learned the value's level: near the success rate (it starts near 0). Not the per-state
    # correlation: once success is ~1 every return is ~1 and that correlation is noise (measured -0.3..0.3).
    assert abs(v_mean - out["end"]) < 0.3 and v_mean > 0.5


def test_readout_fit_metrics_correlation_and_explained_variance():
    g = torch.tensor([0.0, 1.0, 0.0, 1.0])
    assert sapo.readout_corr(g * 0.5 + 0.2, g) == pytest.approx(1.0)
    assert sapo.explained_variance(g, g) == 1.0  # a perfect read-out explains every return
    assert sapo.explained_variance(torch.full((4,), 0.5), g) == pytest.approx(0.0)  # the mean explains nothing
    assert sapo.explained_variance(1.0 - g, g) == pytest.approx(1.0 - 4.0)  # anti-correlated: worse than the mean
    assert sapo.readout_corr(torch.ones(4), g) == 0.0 and sapo.explained_variance(g, torch.ones(4)) == 0.0


def test_readout_lr_scale_moves_only_the_two_readout_rows_further(tmp_path):
    """``readout_lr_scale``: the w+/w- rows step ``scale`` times as far as AdamW moves them; every other weight (the
    rest of the tied embedding included) steps exactly as without it."""
    from agentgym.rl.update import _optimizer_steps, _Tally

    steps = {}
    for scale in (1.0, 100.0):
        args = tiny_echo_args(sapo.Args, tmp_path / f"s{scale:g}", readout_lr_scale=scale)
        trainer = Trainer(args, algo="sapo", reserved_tokens=[sapo.W_PLUS, sapo.W_MINUS])
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        for p in trainer.model.parameters():
            p.grad = torch.full_like(p, 1e-3)
        _optimizer_steps(trainer, _Tally())
        steps[scale] = {n: p.detach() - before[n] for n, p in trainer.model.named_parameters()}
        ids = trainer.reserved_ids
    head = next(n for n in steps[1.0] if steps[1.0][n].shape[0] > max(ids))  # the (tied) output embedding
    others = [i for i in range(steps[1.0][head].shape[0]) if i not in ids]
    assert steps[1.0][head][ids].abs().min() > 0
    torch.testing.assert_close(steps[100.0][head][ids], 100 * steps[1.0][head][ids])
    torch.testing.assert_close(steps[100.0][head][others], steps[1.0][head][others], rtol=0, atol=0)
    for n in steps[1.0]:
        if n != head:
            torch.testing.assert_close(steps[100.0][n], steps[1.0][n], rtol=0, atol=0)
    with pytest.raises(ValueError, match="positive"):
        sapo.check_args(sapo.Args(readout_lr_scale=0.0))
