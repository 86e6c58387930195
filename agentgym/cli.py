"""The ``agentgym`` command: list, play, eval, data, and the family/board subcommands.

Subcommands that belong to one part of the project (``webshop serve``, ``leaderboard ...``, ``submit``,
``train``) are thin: they hand their arguments to that part's own ``main(argv)``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

#: subcommand -> "module:function" taking the remaining argv.
DELEGATED: dict[str, tuple[str, str]] = {
    "webshop": ("agentgym.envs.webshop.server:main", "the WebShop web site: `agentgym webshop serve`"),
    "leaderboard": ("agentgym.leaderboard.cli:main", "verify submissions and build the leaderboard"),
    "submit": ("agentgym.leaderboard.cli:submit_main", "validate a submission folder and write its entry"),
    "train": ("agentgym.rl.cli:train_main", "train a baseline: `agentgym train grpo --config FILE`"),
}


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_agent(spec: str, **kwargs: Any):
    """Build an agent from a command-line spec.

    ``random``, ``expert``, ``module:Class`` (any importable class; constructed with no arguments), and
    the model agents of :mod:`agentgym.agents` (``hf:ID_OR_PATH``, ``openai:MODEL``, ...) when present.
    """
    from agentgym.agents import ExpertAgent, RandomAgent

    if spec == "random":
        return RandomAgent(seed=kwargs.get("seed", 0))
    if spec == "expert":
        return ExpertAgent()
    try:
        from agentgym.agents import from_spec  # model agents (hf:, openai:, react:, reflexion:)
    except ImportError:
        from_spec = None
    if from_spec is not None:
        agent = from_spec(spec, **kwargs)
        if agent is not None:
            return agent
    if ":" in spec:
        module, _, cls = spec.partition(":")
        try:
            return getattr(importlib.import_module(module), cls)()
        except (ImportError, AttributeError) as exc:
            raise SystemExit(f"cannot load agent {spec!r}: {exc}") from exc
    raise SystemExit(f"unknown agent {spec!r}: use random, expert, hf:ID, openai:MODEL or module:Class")


def cmd_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentgym  # noqa: F401

    for env_id, spec in sorted(gym.registry.items()):
        if not env_id.startswith("agentgym/"):
            continue
        try:
            cls = _resolve(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
            doc = (cls.__doc__ or "").strip().splitlines()[0]
        except Exception as exc:  # a missing extra must not hide the other envs
            doc = f"(needs an extra: {type(exc).__name__}: {exc})"
        # Variants share a class: say what the registration sets, so ids are told apart.
        settings = ", ".join(f"{k}={v!r}" for k, v in (spec.kwargs or {}).items())
        limit = f"{spec.max_episode_steps} steps" if spec.max_episode_steps else "no step limit"
        print(f"{env_id:36s} {doc} [{limit}{'; ' + settings if settings else ''}]")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import agentgym  # noqa: F401

    env = gym.make(args.env_id, **_parse_kwargs(args.env_kwarg))
    obs, info = env.reset(seed=args.seed)
    total = 0.0
    print(obs)
    while True:
        if info.get("admissible_actions"):
            print("actions:", ", ".join(map(str, info["admissible_actions"][:40])))
        try:
            action = input("> ")
        except EOFError:
            print()
            break
        if action.strip() in {":q", ":quit"}:
            break
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        print(obs)
        flag = "" if info.get("is_action_valid", True) else f"  [invalid: {info.get('invalid_reason')}]"
        print(f"reward {float(reward):+.2f}  return {total:+.2f}{flag}")
        if terminated or truncated:
            print("solved!" if info.get("success") else ("out of steps." if truncated else "episode over."))
            break
    env.close()
    return 0


def _parse_kwargs(items: Sequence[str] | None) -> dict[str, Any]:
    import json

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--env-kwarg takes KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cmd_eval_suite(args: argparse.Namespace) -> int:
    """``eval --suite NAME --out DIR``: play a named protocol and write a leaderboard submission."""
    from pathlib import Path

    from agentgym.evaluation import format_table
    from agentgym.leaderboard.submission import run_suite, slugify
    from agentgym.results import columns
    from agentgym.suites import get_suite

    try:
        suite = get_suite(args.suite)
    except KeyError as exc:
        raise SystemExit(str(exc.args[0])) from exc
    agent = load_agent(args.agent, **_agent_kwargs(args))
    out = Path(args.out or f"submission-{suite.name}-{slugify(getattr(agent, 'name', args.agent))}")
    from agentgym.data import DataNotFoundError

    try:
        path, results = run_suite(
            suite,
            agent,
            out,
            batch_size=args.batch_size,
            resume=not args.no_resume,
            progress=not args.quiet,
            env_backend=args.env_backend,
            num_workers=args.num_workers,
        )
    except DataNotFoundError as exc:  # a data-backed suite without its data: say which command fixes it
        raise SystemExit(f"suite {suite.name}: {exc}") from exc
    for env_id, row in results.items():
        cols = columns(env_id)
        print(
            format_table(
                [{"env": env_id, "agent": getattr(agent, "name", args.agent), **row}], ["env", "agent", *cols]
            )
        )
    print(f"submission written to {path.parent}; add metadata and make a board entry with `agentgym submit {out}`")
    return 0


def _agent_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Model-agent settings of ``eval`` (AGENTS): passed to ``agentgym.agents.from_spec``; None = default."""
    keys = ("base_url", "temperature", "max_new_tokens", "history_length", "style")
    return {"seed": args.seed, **{k: getattr(args, k, None) for k in keys}}


def _eval_trials(args: argparse.Namespace, agent: Any, specs: list) -> int:
    """``eval --trials K`` (AGENTS): Reflexion's protocol, success within 1..K trials per task."""
    from agentgym.agents.reflexion import ReflexionAgent, run_reflexion
    from agentgym.evaluation import format_table

    if not isinstance(agent, ReflexionAgent):
        raise SystemExit("--trials needs a reflexion agent: --agent reflexion:hf:ID or reflexion:openai:MODEL")
    per_trial, solved = run_reflexion(
        args.env,
        agent,
        specs,
        trials=args.trials,
        env_kwargs=_parse_kwargs(args.env_kwarg),
        batch_size=args.batch_size,
        log_path=args.log,
        resume=not args.no_resume,
        progress=not args.quiet,
        env_backend=args.env_backend,
        num_workers=args.num_workers,
    )
    rows = [
        {
            "env": args.env,
            "agent": agent.name,
            "trial": k,
            "success_rate": sum(1 for s in solved if s and s <= k) / len(specs),
        }
        for k in range(1, args.trials + 1)
    ]
    print(format_table(rows, ["env", "agent", "trial", "success_rate"]))
    return 0


def _print_paper_columns(env_id: str, agent: str, episodes: Sequence[Any]) -> None:
    """The published tables' columns (ALFWorld per task type, WebShop score, HotpotQA EM/F1) when they apply."""
    from agentgym.evaluation import format_table
    from agentgym.results import ResultsError, columns, env_results, family

    if family(env_id) not in ("alfworld", "webshop", "hotpotqa") or not episodes:
        return
    try:
        res = env_results(env_id, episodes)
    except ResultsError as exc:
        print(f"(no per-column table: {exc})")
        return
    print(
        format_table(
            [{"env": env_id, "agent": agent, **res}], ["env", "agent", *[c for c in columns(env_id) if c in res]]
        )
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from agentgym.evaluation import EpisodeSpec, format_table, run_episodes, seed_specs

    if args.suite:
        return cmd_eval_suite(args)
    if not args.env:
        raise SystemExit("eval needs --env ID or --suite NAME (see agentgym.suites: sokoban, alfworld-eval, ...)")
    if args.out and not args.log:
        from pathlib import Path

        args.log = str(Path(args.out) / f"{args.env.split('/')[-1]}.jsonl")
    agent = load_agent(args.agent, **_agent_kwargs(args))
    if args.split:
        # A split is played in order, each task once: episode i is task (seed + i) of the split.
        specs = [
            EpisodeSpec(args.seed + i, {"split": args.split, "index": args.seed + i}) for i in range(args.episodes)
        ]
    else:
        specs = seed_specs(args.episodes, seed=args.seed)
    if getattr(args, "trials", 1) > 1:
        return _eval_trials(args, agent, specs)
    result = run_episodes(
        args.env,
        agent,
        specs,
        env_kwargs=_parse_kwargs(args.env_kwarg),
        batch_size=args.batch_size,
        log_path=args.log,
        resume=not args.no_resume,
        progress=not args.quiet,
        env_backend=args.env_backend,
        num_workers=args.num_workers,
    )
    row = {"env": args.env, "agent": getattr(agent, "name", args.agent), **result.summary()}
    print(
        format_table([row], ["env", "agent", "episodes", "success_rate", "mean_return", "mean_length", "invalid_rate"])
    )
    _print_paper_columns(args.env, row["agent"], result.episodes)
    if result.resumed:
        print(f"({result.resumed} episode(s) resumed from {args.log})")
    return 0


def cmd_expert_trajectories(args: argparse.Namespace) -> int:
    """``data expert-trajectories ENV_ID --episodes N --out FILE``: the env expert's episodes as SFT data."""
    from agentgym.agents import ExpertAgent
    from agentgym.evaluation import run_episodes
    from agentgym.records import seed_specs

    if not args.out:
        raise SystemExit("data expert-trajectories needs --out FILE (a JSONL episode log)")
    result = run_episodes(
        args.family,
        ExpertAgent(),
        seed_specs(args.episodes, seed=args.seed),
        env_kwargs=_parse_kwargs(args.env_kwarg),
        log_path=args.out,
        progress=not args.quiet,
    )
    s = result.summary()
    print(
        f"{len(result.episodes)} expert episodes of {args.family} (seeds {args.seed}..{args.seed + args.episodes - 1}, "
        f"success {s['success_rate']:.2f}) in {args.out}; train on them with "
        f"`python baselines/sft.py --env-id {args.family} --data {args.out}`"
    )
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from agentgym import data

    if args.action == "expert-trajectories":
        return cmd_expert_trajectories(args)
    if args.action == "prepare":
        if not args.source:
            raise SystemExit("data prepare needs --from DIR_OR_FILE")
        path = data.prepare(args.family, args.source, args.dest)
    else:
        path = data.download(args.family, args.dest)
    print(f"{args.family} data ready at {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from agentgym import __version__

    p = argparse.ArgumentParser(prog="agentgym", description="Train and compare LLM agents on text tasks.")
    p.add_argument("--version", action="version", version=f"agentgym {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("list", help="registered envs with a one-line description")
    sp.set_defaults(fn=cmd_list)

    sp = sub.add_parser("play", help="play an env in the terminal (:q quits)")
    sp.add_argument("env_id")
    sp.add_argument("--seed", type=int, default=None)
    sp.add_argument("--env-kwarg", action="append", metavar="KEY=VALUE")
    sp.set_defaults(fn=cmd_play)

    sp = sub.add_parser("eval", help="evaluate an agent and print the results table")
    sp.add_argument("--env", help="env id, e.g. agentgym/Sokoban-v0")
    sp.add_argument("--suite", help="named protocol (sokoban, frozenlake, alfworld-eval, webshop-test, ...)")
    sp.add_argument("--out", help="output folder: with --suite, a leaderboard submission; else holds the log")
    sp.add_argument(
        "--agent",
        default="random",
        help="random | expert | hf:ID | openai:MODEL | react:... | reflexion:... | module:Class",
    )
    sp.add_argument("--episodes", type=int, default=10)
    sp.add_argument("--seed", type=int, default=0, help="first reset seed (episode i uses seed+i)")
    sp.add_argument(
        "--split",
        help="data split of a data-backed env (e.g. valid_unseen): plays its tasks seed, seed+1, ... in order",
    )
    sp.add_argument("--log", help="JSONL episode log (appended; resumed from unless --no-resume)")
    sp.add_argument("--no-resume", action="store_true")
    sp.add_argument("--batch-size", type=int, default=8, help="envs played at once")
    sp.add_argument("--env-kwarg", action="append", metavar="KEY=VALUE")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    # Model agents and parallel envs (AGENTS): see agentgym.agents.from_spec and agentgym.envpool.
    sp.add_argument("--base-url", help="OpenAI-compatible server for openai:MODEL (e.g. http://127.0.0.1:8000/v1)")
    sp.add_argument("--temperature", type=float, help="sampling temperature of model agents (default 0.4)")
    sp.add_argument("--max-new-tokens", type=int, help="response length cap of model agents (default 512)")
    sp.add_argument("--history-length", type=int, help="past turns in the prompt (default 2; -1 = all)")
    sp.add_argument("--style", help="prompt style, e.g. erl for Sokoban/FrozenLake (default: the env's first)")
    sp.add_argument("--env-backend", default="inprocess", choices=["inprocess", "async", "ray"])
    sp.add_argument("--num-workers", type=int, default=1, help="env processes/actors for async/ray")
    sp.add_argument("--trials", type=int, default=1, help="Reflexion trials per task (reflexion agents only)")
    sp.set_defaults(fn=cmd_eval)

    sp = sub.add_parser("data", help="download or prepare a data set; write expert trajectories (SFT data)")
    sp.add_argument("action", choices=["download", "prepare", "expert-trajectories"])
    sp.add_argument("family", help="alfworld | webshop | hotpotqa; for expert-trajectories an env id")
    sp.add_argument("--from", dest="source", help="local copy to prepare from")
    sp.add_argument("--dest", help="data root (default: $AGENTGYM_DATA or the user data dir)")
    # expert-trajectories (SFT data for baselines/sft.py): episode i resets with seed+i
    sp.add_argument("--episodes", type=int, default=100, help="expert-trajectories: episodes to play")
    sp.add_argument("--seed", type=int, default=0, help="expert-trajectories: first reset seed (evals use 100000+)")
    sp.add_argument("--out", help="expert-trajectories: JSONL episode log to write (appended, resumed)")
    sp.add_argument("--env-kwarg", action="append", metavar="KEY=VALUE")
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    sp.set_defaults(fn=cmd_data)

    for name, (target, help_text) in DELEGATED.items():
        sp = sub.add_parser(name, help=help_text, add_help=False)
        sp.add_argument("rest", nargs=argparse.REMAINDER)
        sp.set_defaults(fn=None, target=target)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Delegated subcommands take their own flags (``--help`` included), so hand them everything after the name.
    if argv and argv[0] in DELEGATED:
        try:
            fn = _resolve(DELEGATED[argv[0]][0])
        except ImportError as exc:
            raise SystemExit(f"`agentgym {argv[0]}` is unavailable: {exc}") from exc
        return int(fn(argv[1:]) or 0)
    args = parser.parse_args(argv)
    from agentgym.data import DataNotFoundError

    try:
        return int(args.fn(args) or 0)
    except DataNotFoundError as exc:  # the message names the command that fixes it: no traceback
        raise SystemExit(f"agentgym: {exc}") from None


if __name__ == "__main__":
    sys.exit(main())
