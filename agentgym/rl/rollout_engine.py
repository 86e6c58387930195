"""The rollout engine: which generator plays the training rollouts, and how the trainer's weights reach it.

``rollout_engine: hf`` generates with HF ``generate`` on the very model being trained (no copy, nothing to
sync). ``rollout_engine: vllm`` runs a vLLM engine in the trainer's process (colocated, as verl-agent, TRL's
``vllm_mode="colocate"`` and SkyRL do) and pushes the policy's full state dict into it after every update
(``Worker.reload_weights`` through ``LLM.collective_rpc``); with LoRA the adapter is merged into the pushed
weights, so the engine always samples from the policy that is being trained. vLLM returns sampling
log-probs; the trainer still recomputes them with its own forward for the loss and logs the gap as
``rollout/logprob_diff`` (mean |sampling - recomputed| per token), the importance ratio's drift.

Under FSDP the policy's layers are gathered between updates (``agentgym.rl.distributed``), so each rank
pushes whole tensors into its own engine (tensor parallel 1 per rank).

LoRA (``lora_rank > 0``, needs ``peft``): only the adapter is trained; the reference model (a copy taken
before the adapter is added) and the critic stay full models.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentgym.models.loading import quiet_loading

ENGINES = ("hf", "vllm")


def apply_lora(model: Any, *, rank: int, alpha: float, dropout: float, target_modules: list[str]) -> Any:
    """Wrap ``model`` with a LoRA adapter (peft); the base weights are frozen, the adapter is trainable."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        from gymnasium.error import DependencyNotInstalled

        raise DependencyNotInstalled('LoRA needs peft: pip install "agentgym[lora]"') from exc
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules) or "all-linear",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def is_lora(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_adapter")


def policy_state_dict(model: Any) -> dict[str, Any]:
    """The policy's weights under the base model's HF names, LoRA merged in (what a rollout engine loads).

    The adapter is merged into a copy of each wrapped weight (``W + B A * scale``), so the trainable model is
    left exactly as it was.
    """
    import torch

    if not is_lora(model):
        return {k: v.detach() for k, v in model.state_dict().items()}
    from peft.tuners.lora import LoraLayer

    merged: dict[str, Any] = {}
    base = model.get_base_model()
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                weight = module.get_base_layer().weight.detach().clone()
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        weight += module.get_delta_weight(adapter).to(weight.dtype)
                merged[f"{name}.weight"] = weight
                bias = getattr(module.get_base_layer(), "bias", None)
                if bias is not None:
                    merged[f"{name}.bias"] = bias.detach()
        for key, value in base.state_dict().items():
            if "lora_" in key:
                continue
            clean = key.replace(".base_layer.", ".")
            merged.setdefault(clean, value.detach())
    return merged


def rollout_model_folder(model: Any, tokenizer: Any, run_dir: str | Path) -> Path:
    """Save the policy (LoRA merged) as a checkpoint folder a vLLM engine can start from."""
    return save_policy_folder(model, tokenizer, Path(run_dir) / "rollout_model")


def save_policy_folder(model: Any, tokenizer: Any, folder: str | Path) -> Path:
    """The policy (LoRA merged) and its tokenizer as a plain HF folder (``from_pretrained``, ``hf:FOLDER``)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = model.get_base_model() if is_lora(model) else model
    with quiet_loading():  # no per-shard bar in the run's log: the trainer prints one line per stage
        base.save_pretrained(folder, state_dict=policy_state_dict(model))
    tokenizer.save_pretrained(folder)
    return folder


def build_vllm_generator(model: Any, tokenizer: Any, args: Any) -> Any:
    """A colocated vLLM engine over the current policy (see the module docstring)."""
    from agentgym.models.generation import VLLMGenerator

    # In-process engine core: the weight push reaches the model without pickling tensors across processes.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    folder = rollout_model_folder(model, tokenizer, args.run_dir)
    dtype = str(args.dtype).replace("bf16", "bfloat16")
    return VLLMGenerator(
        str(folder),
        tokenizer,
        dtype=dtype,
        seed=int(args.seed),
        gpu_memory_utilization=float(args.vllm_gpu_memory_utilization),
        max_model_len=int(args.max_prompt_tokens) + int(args.max_new_tokens),
        enforce_eager=True,
        # log-probs after temperature/top-p, i.e. of the distribution actually sampled (the trainer's too)
        logprobs_mode="processed_logprobs",
    )


def push_weights(generator: Any, model: Any) -> None:
    """Load the trainer's current weights into the engine (a no-op for the HF engine: it is the model)."""
    load = getattr(generator, "load_weights", None)
    if load is not None:
        load(policy_state_dict(model))


def export_policy(model: Any, tokenizer: Any, folder: Path, args: Any, template: Any, algo: str) -> Path:
    """Write the policy as a plain HF folder with the prompt settings it was trained with, so that
    ``agentgym eval --agent hf:<folder>`` prompts as training did."""
    from agentgym.models.prompt_settings import write_prompt_settings

    folder = save_policy_folder(model, tokenizer, folder)
    write_prompt_settings(
        folder,
        env_id=args.env_id,
        style=args.prompt_style,
        template=getattr(template, "id", type(template).__name__),
        history_length=args.history_length,
        max_new_tokens=args.max_new_tokens,
        max_prompt_tokens=args.max_prompt_tokens,
        answer_format=template.format_answer("...", "ACTION"),
        trained_by=algo,
    )
    return folder
