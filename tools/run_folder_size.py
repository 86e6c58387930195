"""What a run folder holds, part by part, in bytes: the checkpoint's weights and optimizer state, the exported
model, logs. Writes a JSON record (value, versions, date, machine, command).

Run: ``python tools/run_folder_size.py runs/demo_sft_smollm2_frozenlake --out docs/figures/run_folder.json``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tensor_bytes(x) -> int:
    """Bytes of the tensors in a nested state (each storage counted once: tied weights share one)."""
    import torch

    seen: set[int] = set()

    def walk(v) -> int:
        if isinstance(v, torch.Tensor):
            key = v.untyped_storage().data_ptr()
            if key in seen:
                return 0
            seen.add(key)
            return v.untyped_storage().nbytes()
        if isinstance(v, dict):
            return sum(walk(u) for u in v.values())
        if isinstance(v, (list, tuple)):
            return sum(walk(u) for u in v)
        return 0

    return walk(x)


def folder_parts(run: Path) -> dict[str, int]:
    """Bytes per part of ``run``: each top-level entry, and inside the latest checkpoint its state's keys."""
    from agentgym.rl.checkpoint import STATE_FILE, latest_checkpoint, load_checkpoint

    parts: dict[str, int] = {}
    for entry in sorted(run.iterdir()):
        files = [entry] if entry.is_file() else [f for f in entry.rglob("*") if f.is_file()]
        parts[entry.name] = sum(f.stat().st_size for f in files)
    ckpt = latest_checkpoint(run)
    if ckpt is not None:
        state = load_checkpoint(ckpt, restore_rng=False)
        for key, value in state.items():
            parts[f"{ckpt.name}/{STATE_FILE}:{key}"] = tensor_bytes(value)
    return parts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="the run folder")
    p.add_argument("--out", default="docs/figures/run_folder.json", help="the JSON record to write")
    opts = p.parse_args(argv)
    from measure_record import write_record

    run = Path(opts.run)
    parts = folder_parts(run)
    total = sum(v for k, v in parts.items() if ":" not in k)
    for k, v in parts.items():
        print(f"{v / 1e6:10.1f} MB  {k}")
    print(f"{total / 1e6:10.1f} MB  total")
    config = (run / "config.yaml").read_text() if (run / "config.yaml").exists() else ""
    record = {
        "what": "bytes of a run folder, per part (checkpoint state keys: tensor bytes, tied weights once)",
        "value": total,
        "parts": parts,
        "run_config": config,
    }
    write_record(opts.out, record, "tools/run_folder_size.py", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
