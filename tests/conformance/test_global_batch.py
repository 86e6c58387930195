"""``mini_batch_scope="global"`` under torch.distributed: PPO whitens advantages over every rank's tokens, as verl
does on its driver, and the mini-batch counts are summed over ranks (two CPU processes, gloo)."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from agentgym.rl.distributed import DistInfo, sum_over_ranks
from baselines.ppo import masked_whiten


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    values = torch.randn(7, 5, generator=g) * 3.0 + 1.0
    mask = (torch.rand(7, 5, generator=g) > 0.3).float()
    return values, mask


def _worker(rank: int, world: int, port: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        values, mask = _data()
        rows = [i for i in range(values.shape[0]) if i % world == rank]  # ranks hold different row counts
        info = DistInfo(rank=rank, world_size=world, enabled=True)
        out[rank] = {
            "rows": rows,
            "whitened": masked_whiten(values[rows], mask[rows], dist=info),
            "per_rank": masked_whiten(values[rows], mask[rows]),
            "counts": sum_over_ranks([float(mask[rows].sum()), float(len(rows))], info),
        }
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_global_whitening_and_counts_equal_the_single_process_ones():
    values, mask = _data()
    whole = masked_whiten(values, mask)
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_worker, args=(2, _free_port(), out), nprocs=2, join=True)
        results = dict(out)
    for r in results.values():
        assert torch.allclose(r["whitened"], whole[r["rows"]], atol=1e-6)
        assert r["counts"] == [float(mask.sum()), float(values.shape[0])]
    # ours (per rank) whitens each rank's rows by their own statistics: not the global batch's
    assert not all(torch.allclose(r["per_rank"], whole[r["rows"]], atol=1e-3) for r in results.values())
