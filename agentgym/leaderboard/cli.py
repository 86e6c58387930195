"""``agentgym leaderboard verify|build`` and ``agentgym submit DIR``.

Typical flow::

    agentgym eval --suite sokoban --agent expert --out runs/sokoban-expert
    agentgym submit runs/sokoban-expert --name "My agent" --model Qwen/Qwen2.5-1.5B-Instruct --model-size 1.5 \\
        --method GRPO --method-type RL --code https://github.com/me/agent
    agentgym leaderboard verify leaderboards/entries/<slug> --full --mark   # maintainers: record who verified
    agentgym leaderboard verify leaderboards/entries/<slug> --rerun         # maintainers: fresh seeds
    agentgym leaderboard build                                              # full replay of every entry, README + site

Without ``--full`` (or ``--rerun``), verify replays a sample: a quick pre-check, never a badge.
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

    if args.mark and not args.full:
        print("--mark needs --full: a sampled replay is a pre-check only", file=sys.stderr)
        return 2
    if args.rerun:
        return cmd_rerun(args)
    report = verify(args.path, full=args.full, sample=args.sample, seed=args.seed, workers=args.workers)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.summary())
        if not args.full and report.ok:
            print(
                "  note: a sampled pre-check; the board replays every episode itself (`agentgym leaderboard build`, "
                "or `verify --full`)"
            )
    if args.mark:
        if not report.ok:
            print("not marked: the submission was rejected", file=sys.stderr)
        elif not Path(args.path).is_dir():
            print("not marked: --mark needs an entry folder (extract the archive into leaderboards/entries/ first)")
            return 1
        else:
            print(
                f"wrote {write_verification(args.path, report)} (a record of who verified it; the badge comes from the build)"
            )
    return 0 if report.ok else 1


def cmd_rerun(args: argparse.Namespace) -> int:
    from agentgym.leaderboard.rerun import RerunError, rerun_entry
    from agentgym.leaderboard.verify import verify

    if not Path(args.path).is_dir():
        print("--rerun needs an entry folder (leaderboards/entries/<slug>)", file=sys.stderr)
        return 2
    report = verify(args.path, full=True, workers=args.workers)
    if not report.ok:
        print(report.summary())
        print("not re-run: the logs do not pass the full replay", file=sys.stderr)
        return 1
    try:
        record = rerun_entry(
            args.path,
            episodes=args.episodes,
            workers=args.workers,
            step_timeout_s=args.step_timeout,
            episode_timeout_s=args.episode_timeout,
            checkpoint=args.checkpoint,
        )
    except RerunError as exc:
        print(f"not re-run: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        for env_id, c in record["comparison"].items():
            res = record["results"][env_id]
            print(
                f"{env_id} {c['column']}: submitted {100 * c['submitted_mean']:.1f} ({c['n_submitted']} episodes), "
                f"rerun {100 * c['rerun_mean']:.1f} ({c['n_rerun']} fresh, {res['failed']} failed); difference "
                f"{100 * c['difference']:+.1f}, 95% CI [{100 * c['ci95'][0]:+.1f}, {100 * c['ci95'][1]:+.1f}], "
                f"p = {c['p_value']:.4f}: {'NOT REPRODUCED on fresh seeds' if c['flagged'] else 'agrees'}"
            )
        for e in record["errors"]:
            print(f"  error: {e}")
        print(f"wrote {Path(args.path) / 'rerun.json'} and rerun/ ({record['seconds']:.1f} s)")
    return 0 if record["ok"] and not record["flagged"] else 1


def cmd_build(args: argparse.Namespace) -> int:
    from agentgym.leaderboard.build import build

    root = Path(args.root)
    out = build(
        root,
        site_dir=Path(args.site) if args.site else None,
        readme=Path(args.readme) if args.readme else None,
        workers=args.workers,
    )
    for slug, tier in sorted(out["tiers"].items()):
        print(f"  {tier:16s} {slug}")
    for p in out["problems"]:
        print(f"  problem: {p}")
    print(f"wrote {out['readme']} and {out['pages']} page(s) under {out['site']}")
    if args.screenshot:
        from agentgym.leaderboard.site import screenshot

        shot = screenshot(Path(out["site"]) / "index.html", Path(out["readme"]).parent / "site-front-page.png")
        print(f"wrote {shot} (the README's picture of the site's front page)")
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
    sp.add_argument(
        "--mark", action="store_true", help="with --full: record who verified the entry (verification.json)"
    )
    sp.add_argument(
        "--rerun", action="store_true", help="re-run the declared agent on fresh seeds and compare (maintainers)"
    )
    sp.add_argument("--episodes", type=int, help="with --rerun: episodes per env (default: the suite's count)")
    sp.add_argument("--step-timeout", type=float, help="with --rerun: seconds per agent answer (default 60)")
    sp.add_argument("--episode-timeout", type=float, help="with --rerun: seconds per episode (default 1800)")
    sp.add_argument(
        "--checkpoint",
        help="with --rerun of an hf: agent: the folder holding the submitted checkpoint here (default: the one "
        "the spec names); its files must match the pinned checkpoint_sha256",
    )
    _add_verify_flags(sp)
    sp.set_defaults(fn=cmd_verify)
    sp = sub.add_parser("build", help="render leaderboards/README.md and the static site")
    sp.add_argument("--root", default=str(DEFAULT_ROOT), help="the leaderboards/ folder (default ./leaderboards)")
    sp.add_argument("--site", help="site output folder (default ROOT/site)")
    sp.add_argument("--readme", help="README output (default ROOT/README.md)")
    sp.add_argument("--workers", type=int, default=2, help="replay processes (default 2)")
    sp.add_argument(
        "--screenshot",
        action="store_true",
        help="also redraw ROOT/site-front-page.png from the built site (headless chromium)",
    )
    sp.set_defaults(fn=cmd_build)
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    return int(args.fn(args) or 0)


def submit_main(argv: Sequence[str] | None = None) -> int:
    """``agentgym submit DIR``: complete the metadata, validate, and write ``leaderboards/entries/<slug>/``."""
    from agentgym.leaderboard.entry import SubmissionError, make_entry

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
    p.add_argument(
        "--runnable",
        help="JSON file with agent.runnable: how to run the agent again (spec, kwargs, model revision, ...)",
    )
    p.add_argument("--sample", type=int, default=10, help="episodes replayed per env as a pre-check (default 10)")
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
    if args.runnable:
        try:
            overrides["runnable"] = json.loads(Path(args.runnable).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"REJECTED: --runnable {args.runnable}: {exc}", file=sys.stderr)
            return 1
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
    print(f"entry written to {entry} (a sampled pre-check passed): add it in a pull request; maintainers run")
    print(f"  agentgym leaderboard verify {entry} --rerun   # fresh seeds; the build replays every episode")
    return 0
