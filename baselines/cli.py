"""``agentgym train <algorithm> --config FILE [flags]``: runs one of the baselines through an explicit table.

:data:`TRAINERS` is the one table of trainers (DESIGN.md section 6): a name and that baseline's module
(``baselines/<name>.py``); the root CLI imports this module only when ``agentgym train`` runs. A new baseline
adds one line here and its name to the baselines contract in pyproject.toml. Nothing is found by scanning folders or importing modules by name.
The table sits here, above ``agentgym.rl``, because it imports every baseline and the library imports none.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from baselines import erl, gigpo, grpo, ppo, rloo, sapo, seed, sft

#: Algorithm name -> its baseline module (which has ``Args`` and ``train(args)``).
TRAINERS: dict[str, ModuleType] = {
    "ppo": ppo,
    "grpo": grpo,
    "rloo": rloo,
    "gigpo": gigpo,
    "sapo": sapo,
    "erl": erl,
    "seed": seed,
    "sft": sft,
}

#: The names of :data:`TRAINERS`, in table order.
ALGORITHMS: tuple[str, ...] = tuple(TRAINERS)

USAGE = """usage: agentgym train ALGORITHM [--config FILE] [--FIELD VALUE ...]

ALGORITHM is one of: {algos}. Table-row configs live in baselines/configs/, CPU-sized ones in
baselines/configs/small/. Any Args field can be overridden on the command line (e.g. --seed 2).
Example: agentgym train grpo --config baselines/configs/small/grpo_tiny_echo.yaml
"""


def load_trainer(algo: str) -> ModuleType:
    """The baseline module of ``algo`` (a key of :data:`TRAINERS`).

    Raises:
        KeyError: ``algo`` is not in the table (the message lists the known names).
        ModuleNotFoundError: a module the baseline needs is missing.
    """
    if algo not in TRAINERS:
        raise KeyError(f"no baseline {algo!r}; known: {', '.join(ALGORITHMS)}")
    return TRAINERS[algo]


def parse_train_args(module: ModuleType, algo: str, argv: Sequence[str]) -> Any:
    """``module.Args`` from ``--config FILE`` and the flags of ``argv``, parsed once.

    A missing or broken config, and a run to start from that is not there, end in one line with the fix (before
    any model loads), not a traceback.
    """
    from agentgym.rl.config import key_line, load_config_file, make_args, parse_flags, split_config_flags

    paths, flags = split_config_flags(argv)
    config: dict[str, Any] = {}
    origin: dict[str, str] = {}  # field -> the file that set it last (to point a type error at its line)
    for path in paths:
        try:
            values = load_config_file(path)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"agentgym train {algo}: --config {path}: {exc}") from exc
        config.update(values)
        origin.update(dict.fromkeys(values, path))
    try:
        default = make_args(module.Args, config)
    except TypeError as exc:
        field = str(exc).split(":", 1)[0]
        path = origin.get(field)
        line = key_line(path, field) if path else None
        where = f"{path}{f', line {line}' if line else ''}: " if path else ""
        raise SystemExit(f"agentgym train {algo}: {where}{exc}; fix the value in the config") from exc
    except ValueError as exc:
        raise SystemExit(f"agentgym train {algo}: {exc} (`agentgym train {algo} --help` lists the fields)") from exc
    args = parse_flags(module.Args, default, flags, prog=f"agentgym train {algo}")
    _check_init_from(args.init_from, algo, paths)
    return args


def _check_init_from(init_from: str | None, algo: str, paths: Sequence[str]) -> None:
    """A stage that starts from another run (SFT -> RL) fails in one line when that run is not there."""
    from agentgym.rl.checkpoint import latest_checkpoint

    if not init_from or latest_checkpoint(init_from) is not None or (Path(init_from) / "state.pt").exists():
        return
    sft = [p for p in paths if Path(p).parent.joinpath(f"sft_{Path(p).name.split('_', 1)[-1]}").exists()]
    hint = (
        f"`agentgym train sft --config {Path(sft[0]).parent / ('sft_' + Path(sft[0]).name.split('_', 1)[-1])}`"
        if sft
        else "the run it names"
    )
    raise SystemExit(
        f"agentgym train {algo}: init_from {init_from}: no checkpoint there (no ckpt_*/state.pt); this config "
        f"starts from an earlier run: train that first ({hint}), or point --init-from at a finished run folder"
    )


def train_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentgym train``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE.format(algos=", ".join(ALGORITHMS)))
        return 0 if argv else 2
    algo, rest = argv[0], argv[1:]
    try:
        module = load_trainer(algo)
    except KeyError as e:
        print(f"agentgym train: {e.args[0]}", file=sys.stderr)
        return 2
    module.train(parse_train_args(module, algo, rest))
    return 0


if __name__ == "__main__":
    raise SystemExit(train_main())
