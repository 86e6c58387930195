"""Building a run's pieces: device, policy and tokenizer, reference model, critic, LoRA, FSDP/DDP, optimizers,
rollout engine and prompt template.

:class:`~agentgym.rl.trainer.Trainer` calls these once, in its ``__init__``, in a fixed order: the policy is
loaded, then copied into the reference model and the critic, and only then given its LoRA adapter and sharded.
The order also fixes the random draws (critic head, LoRA init), so a run is reproducible from its seed.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from agentgym.models.loading import cpu_has_native_bf16, resolve_dtype
from agentgym.rl.checkpoint import load_model_weights
from agentgym.rl.config import Args
from agentgym.rl.distributed import DistInfo, shard_model
from agentgym.rl.rollout_engine import ENGINES, apply_lora, build_vllm_generator
from agentgym.rl.toy import add_restricted_words, restricted_vocab_exclusions


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def pick_device(args: Args, dist: DistInfo) -> str:
    """``args.device``; else this rank's CUDA device when there is one; else ``cpu``."""
    if args.device is not None:
        return args.device
    if torch.cuda.is_available():
        return f"cuda:{dist.local_rank}"
    return "cpu"


def load_policy(args: Args, device: str, *, trained: bool = True) -> tuple[Any, Any]:
    """The policy and tokenizer named by ``args.model`` (``tiny``: a tiny random Llama, built in memory).

    A ``trained`` model is loaded in ``args.master_weights`` (fp32 by default: mixed precision, the compute
    dtype is applied by :meth:`Trainer.autocast`); a frozen one (an analyser) in ``args.dtype``.
    """
    from agentgym.models.loading import load_model

    dtype = train_dtype(args) if trained else args.dtype
    if args.model == "tiny":
        from agentgym.models.tiny import make_tiny_model

        model, tokenizer = make_tiny_model(None, seed=args.seed)
        torch_dtype = resolve_dtype(dtype)
        model = model.to(device=device, dtype=torch_dtype) if torch_dtype not in (None, "auto") else model.to(device)
        return model, tokenizer
    return load_model(args.model, dtype=dtype, device=device)


def train_dtype(args: Args) -> str:
    """The dtype the trained weights live in: ``args.master_weights``, or ``args.dtype`` when that is ``same``."""
    master = args.master_weights
    if master == "same":
        return args.dtype
    if master not in ("float32", "fp32"):
        raise ValueError(f"unknown master_weights {master!r}: use float32 or same")
    return "float32"


def autocast_enabled(args: Args, device: str) -> bool:
    """bf16 autocast (``args.bf16_autocast``) on CUDA, and on CPU when ``args.dtype`` asks for bfloat16 and the
    CPU has native bf16 instructions (emulated bf16 is ~3x slower than fp32: ``cpu_has_native_bf16``)."""
    if not args.bf16_autocast:
        return False
    kind = torch.device(device).type
    if kind == "cuda":
        return True
    return kind == "cpu" and resolve_dtype(args.dtype) == torch.bfloat16 and cpu_has_native_bf16()


def reserve_tokens(model: Any, tokenizer: Any, names: list[str]) -> list[int]:
    """Ids for reserved tokens that the tokenizer never produces from text (SAPO's w+ and w-).

    Checkpoints whose embedding matrix has unused rows past the tokenizer (Qwen2.5: 151,936 rows for
    151,665 tokens) use those rows, so the model is unchanged; otherwise the names are added as special
    tokens and the embeddings resized.
    """
    rows = model.get_input_embeddings().weight.shape[0]
    if rows >= len(tokenizer) + len(names):
        return list(range(len(tokenizer), len(tokenizer) + len(names)))
    tokenizer.add_special_tokens({"additional_special_tokens": list(names)}, replace_extra_special_tokens=False)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    return [int(tokenizer.convert_tokens_to_ids(n)) for n in names]


@dataclass
class Policy:
    """The policy before LoRA and sharding, its tokenizer, and the token ids it must never sample.

    Attributes:
        model: the trained model (in ``args.master_weights``).
        tokenizer: its tokenizer.
        reserved_ids: ids of the reserved tokens (SAPO's w+/w-), in the order of their names.
        exclude_ids: ids never sampled and excluded from the training softmax (reserved ids and, with
            ``args.restrict_vocab``, every id outside the allowed words), sorted.
    """

    model: Any
    tokenizer: Any
    reserved_ids: list[int]
    exclude_ids: list[int]


def build_policy(args: Args, device: str, reserved_tokens: list[str] | None) -> Policy:
    """Load the policy (from ``args.init_from`` when set), allocate ``reserved_tokens`` and list excluded ids."""
    model, tokenizer = load_policy(args, device)
    if args.init_from:  # SFT -> RL: the policy (and so the reference model) starts from that run's weights
        load_model_weights(model, args.init_from, model_name=args.model)
    add_restricted_words(model, tokenizer, args)
    reserved_ids = reserve_tokens(model, tokenizer, reserved_tokens) if reserved_tokens else []
    vocab_rows = model.get_output_embeddings().weight.shape[0]
    suppress: set[int] = set(reserved_ids)
    suppress.update(restricted_vocab_exclusions(tokenizer, args, vocab_size=vocab_rows))
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    # The same ids are never sampled and are excluded from the training softmax (ratios start at 1).
    return Policy(model, tokenizer, reserved_ids, sorted(suppress))


def build_reference(model: Any, args: Args, dist: DistInfo, *, autocast: bool) -> Any:
    """A frozen copy of ``model`` for the KL term (sharded like the policy); None when ``args.beta`` is 0."""
    if args.beta <= 0:
        return None
    ref_model = copy.deepcopy(model).eval()
    compute = resolve_dtype(args.dtype)
    if autocast and isinstance(compute, torch.dtype) and compute != resolve_dtype(train_dtype(args)):
        ref_model.to(dtype=compute)  # frozen: held in the compute dtype
    for p in ref_model.parameters():
        p.requires_grad_(False)
    return shard_model(ref_model, args.distributed, dist)


def build_critic(model: Any, args: Args, dist: DistInfo, learning_rate: float) -> tuple[Any, torch.optim.Optimizer]:
    """PPO's :class:`~agentgym.rl.critic.ValueModel` on a copy of ``model`` (sharded like it) and its AdamW."""
    from agentgym.rl.critic import ValueModel

    critic = ValueModel.from_causal_lm(model)  # from the whole model, then sharded like it
    if args.gradient_checkpointing:
        critic.gradient_checkpointing_enable()
    critic = shard_model(critic, args.distributed, dist)
    critic.train()
    optimizer = torch.optim.AdamW(critic.parameters(), lr=float(learning_rate), weight_decay=args.weight_decay)
    return critic, optimizer


def build_trained_policy(model: Any, args: Args, dist: DistInfo) -> tuple[Any, torch.optim.Optimizer]:
    """The policy as it is trained -- LoRA adapter (``args.lora_rank``), sharded, in train mode -- and its AdamW.

    Called after the reference and critic copies are made: only the policy gets the adapter.
    """
    if args.lora_rank > 0:
        model = apply_lora(
            model,
            rank=args.lora_rank,
            alpha=args.lora_alpha,
            dropout=args.lora_dropout,
            target_modules=args.lora_target_modules,
        )
    model = shard_model(model, args.distributed, dist)
    model.train()
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=args.learning_rate,
        weight_decay=args.weight_decay,
    )
    return model, optimizer


def build_generator(args: Args, model: Any, tokenizer: Any) -> Any:
    """The generator of ``args.rollout_engine`` (see :mod:`agentgym.rl.rollout_engine`)."""
    engine = args.rollout_engine
    if engine not in ENGINES:
        raise ValueError(f"unknown rollout_engine {engine!r}: use one of {', '.join(ENGINES)}")
    if engine == "vllm":  # under torchrun every rank runs its own engine over the gathered policy (TP 1)
        return build_vllm_generator(model, tokenizer, args)
    from agentgym.models.generation import HFGenerator

    return HFGenerator(model, tokenizer)
