"""``agentgym train <algorithm> --config FILE [flags]``: runs ``baselines/<algorithm>.py`` of the checkout."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

#: Algorithms with a file in ``baselines/`` (METHODS adds erl and seed there).
ALGORITHMS: tuple[str, ...] = ("ppo", "grpo", "rloo", "gigpo", "sapo", "erl", "seed")

USAGE = """usage: agentgym train ALGORITHM [--config FILE] [--FIELD VALUE ...]

ALGORITHM is one of: {algos}. Table-row configs live in baselines/configs/, CPU-sized ones in
baselines/configs/small/. Any Args field can be overridden on the command line (e.g. --seed 2).
Example: agentgym train grpo --config baselines/configs/small/grpo_tiny_echo.yaml
"""


def _baselines_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _check_configs(module, algo: str, argv: Sequence[str]) -> None:
    """A missing or broken ``--config`` is one line with the fix (before any model loads), not a traceback."""
    from agentgym.rl.config import load_config_file, make_args

    paths = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--config"]
    paths += [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
    config: dict = {}
    for path in paths:
        try:
            config.update(load_config_file(path))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"agentgym train {algo}: --config {path}: {exc}") from None
    try:
        make_args(module.Args, config)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"agentgym train {algo}: {exc} (`agentgym train {algo} --help` lists the fields)") from None


def train_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agentgym train``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE.format(algos=", ".join(ALGORITHMS)))
        return 0 if argv else 2
    algo, rest = argv[0], argv[1:]
    root = _baselines_root()
    if not (root / "baselines" / f"{algo}.py").exists():
        known = sorted(p.stem for p in (root / "baselines").glob("*.py")) if (root / "baselines").is_dir() else []
        print(
            f"agentgym train: no baseline {algo!r} (looked for {root / 'baselines' / (algo + '.py')}); "
            f"known: {', '.join(known) or 'none -- run from a source checkout of agentgym'}",
            file=sys.stderr,
        )
        return 2
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(f"baselines.{algo}")
    _check_configs(module, algo, rest)
    saved, sys.argv = sys.argv, [f"agentgym train {algo}", *rest]  # the usage line names what was typed
    try:
        module.main(rest)
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    raise SystemExit(train_main())
