"""Multi-GPU training under ``torchrun``: DDP-style gradient averaging or FSDP2 sharding of decoder layers.

Launch any baseline with ``torchrun --nproc_per_node N baselines/grpo.py --config ...``. Each rank plays
its own share of the tasks (rollouts are embarrassingly parallel) and the gradients are averaged.

* ``strategy="ddp"`` (small models): every rank holds the whole model; after backward the gradients are
  all-reduced (averaged) before clipping and the optimizer step. We average by hand instead of wrapping
  in ``DistributedDataParallel`` because the chunked log-prob code calls the decoder and the output
  head separately (DDP only syncs gradients of a forward that goes through its wrapper).
* ``strategy="fsdp"`` (1.5B/7B): ``torch.distributed.fsdp.fully_shard`` on every decoder layer, so their
  parameters, gradients and optimizer states are sharded; the embeddings, final norm and head stay
  replicated and are averaged like DDP.

Ranks play different episodes, so they make different numbers of forward calls (one generate per turn,
episodes ending at different turns, different row counts). FSDP2 all-gathers a layer on every forward,
so uneven counts would deadlock. Two rules keep every rank in step (``agentgym.rl.update``, ``agentgym.rl.trainer``):

* between updates the policy's layers stay *gathered* (:func:`gather_for_inference`: one all-gather per
  update, then generation, scoring and validation are local, like the full-weight rollout copy of verl's
  hybrid engine); :func:`reshard_for_training` shards them again before the next update;
* sharded forwards that remain (training micro-batches, the reference model and the critic in scoring)
  run the same number of times on every rank: counts are padded to :func:`max_over_ranks` with
  zero-weighted dummy micro-batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class DistInfo:
    """Where this process sits: ``rank``/``world_size``/``local_rank``; ``enabled`` under torchrun."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    enabled: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str | None = None) -> DistInfo:
    """Join the process group when launched by torchrun (``WORLD_SIZE`` > 1); a no-op otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and (device is None or str(device).startswith("cuda"))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    if use_cuda:
        torch.cuda.set_device(local)
    return DistInfo(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local, enabled=True)


def shard_model(model: Any, strategy: str, info: DistInfo) -> Any:
    """Apply the sharding strategy (``ddp``: nothing to do; ``fsdp``: FSDP2 on each decoder layer)."""
    if not info.enabled or strategy == "ddp":
        return model
    if strategy != "fsdp":
        raise ValueError(f"unknown distributed strategy {strategy!r}: use ddp or fsdp")
    from torch.distributed.fsdp import fully_shard

    backbone = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if backbone is None:
        backbone = getattr(model, "backbone", None)  # agentgym.rl.critic.ValueModel
    layers = getattr(backbone, "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__} has no decoder .layers to shard; use --distributed ddp")
    for layer in layers:
        fully_shard(layer)
    return model


def fsdp_modules(model: Any) -> list[Any]:
    """The FSDP2-sharded submodules of ``model`` (empty when nothing is sharded)."""
    if model is None:
        return []
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        return []
    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def gather_for_inference(model: Any) -> None:
    """All-gather every sharded layer and keep it whole, so forwards make no collective calls.

    A collective call: every rank must make it at the same point. Undone by :func:`reshard_for_training`.
    """
    for m in fsdp_modules(model):
        m.unshard()
        m.set_reshard_after_forward(False)


def reshard_for_training(model: Any) -> None:
    """Free the gathered weights again: forwards all-gather each layer and backward reduce-scatters it."""
    for m in fsdp_modules(model):
        m.set_reshard_after_forward(True)
        m.reshard()


def max_over_ranks(n: int, info: DistInfo) -> int:
    """The largest ``n`` over all ranks (``n`` itself when not distributed); a collective call."""
    if not info.enabled:
        return int(n)
    import torch.distributed as dist

    device = f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([int(n)], dtype=torch.long, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def sum_over_ranks(values: list[float], info: DistInfo) -> list[float]:
    """Element-wise sums of ``values`` over all ranks (``values`` itself when not distributed); a collective call."""
    if not info.enabled:
        return [float(v) for v in values]
    import torch.distributed as dist

    device = f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def average_gradients(model: Any, info: DistInfo) -> None:
    """All-reduce (mean) the gradients of replicated (non-sharded) parameters across ranks."""
    if not info.enabled:
        return
    import torch.distributed as dist

    for p in model.parameters():
        if p.grad is None or type(p).__name__ == "DTensor":  # FSDP2 reduce-scatters its own shards
            continue
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad.div_(info.world_size)


def all_gather_objects(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's ``obj`` (for metrics); ``[obj]`` when not distributed."""
    if not info.enabled:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier(info: DistInfo) -> None:
    if info.enabled:
        import torch.distributed as dist

        dist.barrier()


def _is_dtensor(t: Any) -> bool:
    return type(t).__name__ == "DTensor"


def clip_grad_norm(params: list[Any], max_norm: float, info: DistInfo) -> torch.Tensor:
    """Clip gradients to a global norm; handles FSDP2 sharded (DTensor) and replicated gradients together.

    Sharded gradients contribute their local shards' squared norms summed over ranks; replicated ones (already
    averaged, identical on every rank) count once. Without sharding this is ``torch.nn.utils.clip_grad_norm_``.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not any(_is_dtensor(g) for g in grads):
        return torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None], max_norm)
    import torch.distributed as dist

    dev = next(g.to_local().device for g in grads if _is_dtensor(g))
    sharded = torch.zeros((), device=dev)
    replicated = torch.zeros((), device=dev)
    for g in grads:
        if _is_dtensor(g):
            sharded += g.to_local().float().pow(2).sum()
        else:
            replicated += g.float().pow(2).sum().to(dev)
    if info.enabled:
        dist.all_reduce(sharded, op=dist.ReduceOp.SUM)
    total = torch.sqrt(sharded + replicated)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device) if not _is_dtensor(g) else coef.item())
    return total


def is_sharded(model: Any) -> bool:
    """True when some parameters are FSDP2 DTensors (state dicts must then be gathered collectively)."""
    return any(_is_dtensor(p) for p in model.parameters())


def full_state_dicts(model: Any, optimizer: Any) -> tuple[dict, dict]:
    """Full (unsharded, CPU) model and optimizer state dicts; a collective call on every rank when sharded."""
    if not is_sharded(model):
        return model.state_dict(), optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=opts), get_optimizer_state_dict(model, optimizer, options=opts)


def load_full_state_dicts(model: Any, optimizer: Any, model_state: dict, optim_state: dict) -> None:
    """Inverse of :func:`full_state_dicts` (every rank loads the full dicts; shards are taken from them)."""
    if not is_sharded(model):
        model.load_state_dict(model_state)
        optimizer.load_state_dict(optim_state)
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    opts = StateDictOptions(full_state_dict=True)
    set_model_state_dict(model, model_state, options=opts)
    set_optimizer_state_dict(model, optimizer, optim_state, options=opts)


def copy_weights(src: Any, dst: Any, *, sharded: bool) -> None:
    """Load ``src``'s weights into ``dst`` (the reference model from the policy); collective when ``sharded``."""
    if not sharded:
        dst.load_state_dict(src.state_dict())
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        set_model_state_dict,
    )

    reshard_for_training(src)
    full = get_model_state_dict(src, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    gather_for_inference(src)
    set_model_state_dict(dst, full, options=StateDictOptions(full_state_dict=True))
