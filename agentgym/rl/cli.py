"""``agentgym train <algorithm> --config FILE [flags]``: runs one of the baselines through an explicit table.

:data:`TRAINERS` is the one table of trainers (DESIGN.md section 6): a name, and a function that imports
that baseline's module (``baselines/<name>.py``, shipped as the ``baselines`` package) when it is asked for.
A new baseline adds one line here. Nothing is found by scanning folders or importing modules by name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType


def _ppo() -> ModuleType:
    from baselines import ppo

    return ppo


def _grpo() -> ModuleType:
    from baselines import grpo

    return grpo


def _rloo() -> ModuleType:
    from baselines import rloo

    return rloo


def _gigpo() -> ModuleType:
    from baselines import gigpo

    return gigpo


def _sapo() -> ModuleType:
    from baselines import sapo

    return sapo


def _erl() -> ModuleType:
    from baselines import erl

    return erl


def _seed() -> ModuleType:
    from baselines import seed

    return seed


def _sft() -> ModuleType:
    from baselines import sft

    return sft


#: Algorithm name -> the loader of its baseline module (which has ``Args`` and ``main(argv)``).
TRAINERS: dict[str, Callable[[], ModuleType]] = {
    "ppo": _ppo,
    "grpo": _grpo,
    "rloo": _rloo,
    "gigpo": _gigpo,
    "sapo": _sapo,
    "erl": _erl,
    "seed": _seed,
    "sft": _sft,
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
        ModuleNotFoundError: the ``baselines`` package is not installed (the message says how to install it).
    """
    if algo not in TRAINERS:
        raise KeyError(f"no baseline {algo!r}; known: {', '.join(ALGORITHMS)}")
    try:
        return TRAINERS[algo]()
    except ModuleNotFoundError as e:
        if e.name != "baselines":
            raise
        raise ModuleNotFoundError(
            "the baselines package is not importable: reinstall agentgym from its source checkout "
            "(`pip install -e .` in the repository root), which installs agentgym and baselines together",
            name="baselines",
        ) from e


def _check_configs(module, algo: str, argv: Sequence[str]) -> None:
    """A missing or broken ``--config`` is one line with the fix (before any model loads), not a traceback."""
    from agentgym.rl.checkpoint import latest_checkpoint
    from agentgym.rl.config import key_line, load_config_file, make_args

    paths = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--config"]
    paths += [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
    config: dict = {}
    origin: dict[str, str] = {}  # field -> the file that set it last (to point a type error at its line)
    for path in paths:
        try:
            values = load_config_file(path)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"agentgym train {algo}: --config {path}: {exc}") from exc
        config.update(values)
        origin.update(dict.fromkeys(values, path))
    try:
        args = make_args(module.Args, config)
    except TypeError as exc:
        field = str(exc).split(":", 1)[0]
        path = origin.get(field)
        line = key_line(path, field) if path else None
        where = f"{path}{f', line {line}' if line else ''}: " if path else ""
        raise SystemExit(f"agentgym train {algo}: {where}{exc}; fix the value in the config") from exc
    except ValueError as exc:
        raise SystemExit(f"agentgym train {algo}: {exc} (`agentgym train {algo} --help` lists the fields)") from exc
    # A stage that starts from another run (SFT -> RL) fails in one line before any model loads.
    flags = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--init-from", "--init_from")]
    init_from = flags[-1] if flags else getattr(args, "init_from", None)
    if init_from and latest_checkpoint(init_from) is None and not (Path(init_from) / "state.pt").exists():
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
    except (KeyError, ModuleNotFoundError) as e:
        print(f"agentgym train: {e.args[0]}", file=sys.stderr)
        return 2
    _check_configs(module, algo, rest)
    saved, sys.argv = sys.argv, [f"agentgym train {algo}", *rest]  # the usage line names what was typed
    try:
        module.main(rest)
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    raise SystemExit(train_main())
