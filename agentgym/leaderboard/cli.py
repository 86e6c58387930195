"""``agentgym leaderboard verify|build`` and ``agentgym submit DIR``.

Typical flow::

    agentgym eval --suite sokoban --agent expert --out runs/sokoban-expert
    agentgym submit runs/sokoban-expert --name "My agent" --model Qwen/Qwen2.5-1.5B-Instruct --model-size 1.5 \\
        --method GRPO --method-type RL --code https://github.com/me/agent
    agentgym leaderboard verify leaderboards/entries/<slug> --full --mark   # maintainers
    agentgym leaderboard build                                              # README + site
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from agentgym.leaderboard.schema import METHOD_TYPES

DEFAULT_ROOT = Path("leaderboards")


def _add_verify_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=2, help="replay processes (default 2)")
    p.add_argument("--seed", type=int, default=None, help="seed of the replay sample (default: random)")


def cmd_verify(args: argparse.Namespace) -> int:
    from agentgym.leaderboard.verify import verify, write_verification

    report = verify(args.path, full=args.full, sample=args.sample, seed=args.seed, workers=args.workers)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.summary())
    if args.mark:
        if not report.ok:
            print("not marked: the submission was rejected", file=sys.stderr)
        elif not Path(args.path).is_dir():
            print("not marked: --mark needs an entry folder (extract the archive into leaderboards/entries/ first)")
            return 1
        else:
            print(f"wrote {write_verification(args.path, report)}")
    return 0 if report.ok else 1


def cmd_build(args: argparse.Namespace) -> int:
    from agentgym.leaderboard.build import build

    root = Path(args.root)
    out = build(
        root, site_dir=Path(args.site) if args.site else None, readme=Path(args.readme) if args.readme else None
    )
    print(f"wrote {out['readme']} and {out['pages']} page(s) under {out['site']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``agentgym leaderboard verify PATH`` | ``agentgym leaderboard build``."""
    p = argparse.ArgumentParser(prog="agentgym leaderboard", description="Verify submissions and build the board.")
    sub = p.add_subparsers(dest="action", required=True)
    sp = sub.add_parser("verify", help="check a submission folder, .zip or .tar(.gz)")
    sp.add_argument("path", help="submission folder, .zip or .tar(.gz), or an entry under leaderboards/entries/")
    sp.add_argument("--full", action="store_true", help="replay every episode (default: a random sample)")
    sp.add_argument("--sample", type=int, default=25, help="episodes replayed per env without --full")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")
    sp.add_argument("--mark", action="store_true", help="write verification.json into the entry (shows 'verified')")
    _add_verify_flags(sp)
    sp.set_defaults(fn=cmd_verify)
    sp = sub.add_parser("build", help="render leaderboards/README.md and the static site")
    sp.add_argument("--root", default=str(DEFAULT_ROOT), help="the leaderboards/ folder (default ./leaderboards)")
    sp.add_argument("--site", help="site output folder (default ROOT/site)")
    sp.add_argument("--readme", help="README output (default ROOT/README.md)")
    sp.set_defaults(fn=cmd_build)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    return int(args.fn(args) or 0)


def submit_main(argv: Sequence[str] | None = None) -> int:
    """``agentgym submit DIR``: complete the metadata, validate, and write ``leaderboards/entries/<slug>/``."""
    from agentgym.leaderboard.submission import SubmissionError, make_entry

    p = argparse.ArgumentParser(
        prog="agentgym submit",
        description="Validate a submission (from `agentgym eval --suite NAME --out DIR`) and write its board entry.",
    )
    p.add_argument("path", help="submission folder, .zip or .tar(.gz)")
    p.add_argument("--name", help="agent name shown on the board")
    p.add_argument("--model", help="base model id (e.g. Qwen/Qwen2.5-1.5B-Instruct)")
    p.add_argument("--model-size", type=float, help="model parameters in billions")
    p.add_argument("--method", help="method name (GRPO, ReAct, ...)")
    p.add_argument("--method-type", choices=METHOD_TYPES, help="kind of method (default: as in submission.json)")
    p.add_argument("--code", help="link to the code")
    p.add_argument("--paper", help="link to the paper")
    p.add_argument("--contact", help="how to reach the authors")
    p.add_argument("--description", help="one paragraph about the agent")
    p.add_argument(
        "--entries", default=str(DEFAULT_ROOT / "entries"), help="entries folder (default ./leaderboards/entries)"
    )
    p.add_argument("--sample", type=int, default=10, help="episodes replayed per env as a spot check (default 10)")
    p.add_argument("--force", action="store_true", help="replace an existing entry of the same name (default: refuse)")
    _add_verify_flags(p)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    overrides = {
        "name": args.name,
        "model": args.model,
        "model_size_b": args.model_size,
        "method": args.method,
        "method_type": args.method_type,
        "code": args.code,
        "paper": args.paper,
        "contact": args.contact,
        "description": args.description,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    try:
        entry, report = make_entry(
            args.path,
            args.entries,
            overrides=overrides,
            replay_sample=args.sample,
            workers=args.workers,
            overwrite=args.force,
        )
    except SubmissionError as exc:
        print(f"REJECTED: {exc}", file=sys.stderr)
        return 1
    print(report.summary())
    if entry is None:
        return 1
    print(f"entry written to {entry}: add it in a pull request; maintainers verify it with")
    print(f"  agentgym leaderboard verify {entry} --full --mark")
    return 0
