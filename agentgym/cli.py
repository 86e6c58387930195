"""The ``agentgym`` command: list, play, eval, data, and the family/board subcommands.

Subcommands that belong to one part of the project (``webshop serve``, ``leaderboard ...``, ``submit``,
``train``) are thin: they hand their arguments to that part's own ``main(argv)``.

Known failures (missing data, an unknown env id or env argument, a broken log line, a model server that is down,
a bad config path) end in one line saying what to do, and a non-zero exit; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import inspect
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

# Delegated subcommands: each loader imports its part of the project only when that subcommand runs (so
# `agentgym --help` stays fast), and returns its ``main(argv)``.


def _webshop() -> Callable[[list[str]], int | None]:
    from agentgym.envs.webshop.server import main

    return main


def _leaderboard() -> Callable[[list[str]], int | None]:
    from agentgym.leaderboard.cli import main

    return main


def _submit() -> Callable[[list[str]], int | None]:
    from agentgym.leaderboard.cli import submit_main

    return submit_main


def _train() -> Callable[[list[str]], int | None]:
    try:
        from baselines.cli import train_main
    except ModuleNotFoundError as exc:
        if exc.name != "baselines":
            raise
        raise ModuleNotFoundError(
            "the baselines package is not importable: reinstall agentgym from its source checkout "
            "(`pip install -e .` in the repository root), which installs agentgym and baselines together",
            name="baselines",
        ) from exc
    return train_main


def _serve() -> Callable[[list[str]], int | None]:
    from agentgym.models.serve import main

    return main


def _openenv() -> Callable[[list[str]], int | None]:
    from agentgym.integrations.openenv import main

    return main


#: subcommand -> (the loader of its ``main(argv)``, which takes the remaining argv; its help line).
DELEGATED: dict[str, tuple[Callable[[], Callable[[list[str]], int | None]], str]] = {
    "webshop": (_webshop, "the WebShop web site: `agentgym webshop serve`"),
    "leaderboard": (_leaderboard, "verify submissions and build the leaderboard"),
    "submit": (_submit, "validate a submission folder and write its entry"),
    "train": (_train, "train a baseline: `agentgym train grpo --config FILE`"),
    "serve": (_serve, "OpenAI-compatible server: `agentgym serve --model ID [--engine hf|vllm]`"),
    "openenv": (_openenv, "serve an env to the OpenEnv spec: `agentgym openenv serve ID`"),
}


def load_agent(spec: str, *, threads: int | None = None, **kwargs: Any):
    """Build an agent from a command-line spec.

    ``random``, ``expert``, ``module:Class`` (any importable class; constructed with no arguments), and
    the model agents of :mod:`agentgym.agents` (``hf:ID_OR_PATH``, ``openai:MODEL``, ...) when present. A model
    run here (``hf:``) gets ``threads`` CPU threads (None: :func:`agentgym.models.threads.choose_threads`).
    """
    from agentgym.agents import ExpertAgent, RandomAgent, model_target

    target = model_target(spec)
    if target is not None and target[0] == "hf":
        from agentgym.models.threads import apply_threads

        try:
            apply_threads(threads)
        except ValueError as exc:
            raise SystemExit(str(exc)) from None

    if spec == "random":
        return RandomAgent(seed=kwargs.get("seed", 0))
    if spec == "expert":
        return ExpertAgent()
    try:
        from agentgym.agents import from_spec  # model agents (hf:, openai:, react:, reflexion:)
    except ImportError:
        from_spec = None
    if from_spec is not None:
        try:
            agent = from_spec(spec, **kwargs)
        except FileNotFoundError as exc:  # hf:FOLDER that is not there
            raise SystemExit(f"--agent {spec}: {exc}") from exc
        if agent is not None:
            return agent
    if ":" in spec:
        return _import_class(spec)()
    raise SystemExit(f"unknown agent {spec!r}: use random, expert, hf:ID, openai:MODEL or module:Class")


def _import_class(spec: str) -> Any:
    """``module:Class`` (the current folder is searched first, as ``python -m`` does) or ``path/file.py:Class``."""
    module, _, cls = spec.rpartition(":")
    if module.endswith(".py"):
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise SystemExit(f"cannot load agent {spec!r}: no file {path}")
        mod_spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        mod = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = mod
        mod_spec.loader.exec_module(mod)  # errors inside the user's file are shown as they are
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise  # the module exists but imports something missing: the user's traceback helps
            raise SystemExit(
                f"cannot load agent {spec!r}: no module {exc.name!r} (searched the current folder {os.getcwd()} "
                f"and sys.path); run from the folder holding {module.split('.')[0]}.py, or write "
                f"path/to/file.py:{cls}"
            ) from exc
    if not hasattr(mod, cls):
        raise SystemExit(f"cannot load agent {spec!r}: module {module!r} has no {cls!r}")
    return getattr(mod, cls)


def _splits(env_module: str) -> list[str] | None:
    """The split names of a data-backed env family (``--split`` is checked against them); None for other envs."""
    if env_module.startswith("agentgym.envs.alfworld"):
        from agentgym.envs.alfworld.games import SPLITS

        return list(SPLITS)
    if env_module.startswith("agentgym.envs.webshop"):
        from agentgym.envs.webshop.goals import SPLITS

        return list(SPLITS)
    if env_module.startswith("agentgym.envs.hotpotqa"):
        from agentgym.envs.hotpotqa.data import SPLIT_FILES

        return list(SPLIT_FILES)
    return None


def check_env(env_id: str, kwargs: dict[str, Any], split: str | None = None) -> None:
    """Fail in one line, before anything runs, on an unknown env id, env argument or split."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    import agentgym.envs  # noqa: F401  (registers the ids)

    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        ids = [i for i in gym.registry if i.startswith("agentgym/")]
        close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise SystemExit(f"unknown env id {env_id!r}; {hint}`agentgym list` shows the registered ids") from None
    entry = spec.entry_point
    try:
        cls = load_env_creator(entry) if isinstance(entry, str) else entry
    except ImportError:
        return  # a missing extra: making the env says which `pip install` fixes it
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    known = [n for n in params if n != "self" and params[n].kind is not inspect.Parameter.VAR_KEYWORD]
    unknown = [k for k in kwargs if k not in known]
    if unknown and not takes_any:
        raise SystemExit(
            f"--env-kwarg {', '.join(unknown)}: {env_id} takes no such argument; its arguments: {', '.join(known)} "
            "(the env class docstring describes each)"
        )
    if kwargs:
        _check_env_values(env_id, spec, kwargs, params)
    if split is None:
        return
    if "split" not in params:
        raise SystemExit(
            f"--split {split}: {env_id} has no data splits (ALFWorld, WebShop and HotpotQA envs have them); "
            "drop --split to play seeded episodes"
        )
    valid = _splits(cls.__module__)
    if valid is not None and split not in valid:
        raise SystemExit(f"unknown split {split!r} for {env_id}; valid splits: {', '.join(valid)}")


def _check_env_values(env_id: str, spec: Any, kwargs: dict[str, Any], params: Any) -> None:
    """Build the env once with the ``--env-kwarg`` values, so a bad value is one line naming it, not a traceback."""
    import gymnasium as gym

    from agentgym.data import DataFileError

    def rejects(kw: dict[str, Any]) -> Exception | None:
        try:
            gym.make(env_id, **kw).close()
        except DataFileError:  # a broken data file, not the argument: reported (naming the file) when the run starts
            return None
        except (ValueError, TypeError) as exc:
            return exc
        except Exception:  # missing data or extra: reported, with its fix, when the run makes the env
            return None
        return None

    exc = rejects(kwargs)
    if exc is None:
        return
    culprits = [k for k in kwargs if rejects({k: kwargs[k]}) is not None] if len(kwargs) > 1 else list(kwargs)
    culprits = culprits or list(kwargs)
    allowed = []
    for k in culprits:
        p = params.get(k)
        default = (spec.kwargs or {}).get(k, p.default if p is not None else inspect.Parameter.empty)
        kind = p.annotation if p is not None and p.annotation is not inspect.Parameter.empty else None
        allowed.append(
            f"{k}: {kind or 'any'}" + ("" if default is inspect.Parameter.empty else f", default {default!r}")
        )
    given = ", ".join(f"{k}={kwargs[k]!r}" for k in culprits)
    raise SystemExit(
        f"--env-kwarg {given}: {env_id} rejects it ({type(exc).__name__}: {exc}); allowed: {'; '.join(allowed)} "
        "(the env class docstring describes each)"
    ) from exc


def cmd_list(args: argparse.Namespace) -> int:
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    import agentgym.envs  # noqa: F401  (registers the ids)

    for env_id, spec in sorted(gym.registry.items()):
        if not env_id.startswith("agentgym/"):
            continue
        try:
            cls = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
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

    import agentgym.envs  # noqa: F401  (registers the ids)

    kwargs = _parse_kwargs(args.env_kwarg)
    check_env(args.env_id, kwargs)
    env = gym.make(args.env_id, **kwargs)
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
    from agentgym.leaderboard.entry import run_suite, slugify
    from agentgym.results import columns
    from agentgym.suites import get_suite

    try:
        suite = get_suite(args.suite)
    except KeyError as exc:
        raise SystemExit(str(exc.args[0])) from exc
    agent = _tool_agent(args) if args.tool_calls else load_agent(args.agent, **_agent_kwargs(args))
    # Without --out the submission goes under runs/ (git-ignored), never into the current folder's top level.
    out = Path(args.out or Path("runs") / f"submission-{suite.name}-{slugify(getattr(agent, 'name', args.agent))}")
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
            agent_spec=args.agent,  # recorded as the submission's runnable spec
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
    keys = ("base_url", "temperature", "max_new_tokens", "history_length", "style", "threads")
    return {"seed": args.seed, **{k: getattr(args, k, None) for k in keys}}


def _tool_agent(args: argparse.Namespace) -> Any:
    """``eval --tool-calls``: an ``openai:MODEL`` agent that acts through the env's tools (OpenAI tool calls)."""
    from agentgym.agents.tool_agent import OpenAIToolAgent

    kind, _, model = args.agent.partition(":")
    if kind != "openai" or not model:
        raise SystemExit(f"--tool-calls needs --agent openai:MODEL (got {args.agent!r})")
    return OpenAIToolAgent(model, **_agent_kwargs(args))


def _eval_trials(args: argparse.Namespace, agent: Any, specs: list) -> int:
    """``eval --trials K`` (AGENTS): Reflexion's protocol, success within 1..K trials per task."""
    from agentgym.agents.reflexion import ReflexionAgent
    from agentgym.evaluation import format_table, run_reflexion

    if not isinstance(agent, ReflexionAgent):
        raise SystemExit("--trials needs a reflexion agent: --agent reflexion:hf:ID or reflexion:openai:MODEL")
    per_trial, solved = run_reflexion(
        args.env,
        agent,
        specs,
        trials=args.trials,
        reflect_after_last=False,  # its reflections would reach neither the logs nor the table: ~20% of a CPU run
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
    from agentgym.core import env_family
    from agentgym.evaluation import format_table
    from agentgym.results import ResultsError, columns, env_results

    if env_family(env_id) not in ("ALFWorld", "WebShop", "HotpotQA") or not episodes:
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
    from agentgym.agent_io import EpisodeSpec, seed_specs
    from agentgym.evaluation import format_table, run_episodes

    if args.suite:
        return cmd_eval_suite(args)
    if not args.env:
        raise SystemExit("eval needs --env ID or --suite NAME (see agentgym.suites: sokoban, alfworld-eval, ...)")
    if args.out and not args.log:
        from pathlib import Path

        args.log = str(Path(args.out) / f"{args.env.split('/')[-1]}.jsonl")
    check_env(args.env, _parse_kwargs(args.env_kwarg), args.split)
    agent = _tool_agent(args) if args.tool_calls else load_agent(args.agent, **_agent_kwargs(args))
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
    from agentgym.agent_io import seed_specs
    from agentgym.agents import ExpertAgent
    from agentgym.evaluation import run_episodes

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
    if args.action == "verify":  # hash the data files against the shipped manifest
        problems = data.verify([args.family] if args.family else None)
        if problems:
            print(f"{len(problems)} problem(s); fix them as said above, then run `agentgym data verify` again")
            return 1
        return 0
    if not args.family:
        raise SystemExit(f"data {args.action} needs a data set: {' | '.join(data.FAMILIES)}")
    if args.action == "prepare" and args.compile:  # fill ALFWorld's compiled-game cache
        if args.family != "alfworld":
            raise SystemExit("--compile applies to alfworld only")
        from agentgym.envs.alfworld.games import compile_split

        compile_split(args.split or "train")
        return 0
    if args.action == "prepare":
        if not args.source:
            raise SystemExit("data prepare needs --from DIR_OR_FILE")
        path = data.prepare(args.family, args.source, args.dest)
    else:
        path = data.download(args.family, args.dest)
    print(f"{args.family} data ready at {path}")
    return 0


class _Help(argparse.HelpFormatter):
    """Adds ``(default: X)`` to every option whose help does not state its default already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _parser(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text, formatter_class=_Help)


def build_parser() -> argparse.ArgumentParser:
    from agentgym.version import __version__

    p = argparse.ArgumentParser(
        prog="agentgym", description="Train and compare LLM agents on text tasks.", formatter_class=_Help
    )
    p.add_argument("--version", action="version", version=f"agentgym {__version__}")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error (default: one line)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sp = _parser(sub, "list", "registered envs with a one-line description")
    sp.set_defaults(fn=cmd_list)

    sp = _parser(sub, "play", "play an env in the terminal (:q quits)")
    sp.add_argument("env_id", help="env id, e.g. agentgym/Sokoban-v0 (`agentgym list` shows them)")
    sp.add_argument("--seed", type=int, default=None, help="reset seed (default: none, a fresh random task)")
    sp.add_argument("--env-kwarg", action="append", metavar="KEY=VALUE", help=ENV_KWARG_HELP)
    sp.set_defaults(fn=cmd_play)

    sp = _parser(sub, "eval", "evaluate an agent and print the results table")
    sp.add_argument("--env", help="env id, e.g. agentgym/Sokoban-v0 (one of --env or --suite is needed)")
    sp.add_argument("--suite", help="named protocol (sokoban, frozenlake, alfworld-eval, webshop-test, ...)")
    sp.add_argument(
        "--out",
        help="output folder: with --suite, a leaderboard submission (default: runs/submission-SUITE-AGENT); "
        "with --env, holds the log",
    )
    sp.add_argument(
        "--agent",
        default="random",
        help="random | expert | hf:ID[@COMMIT] | hf:FOLDER | openai:MODEL | react:... | reflexion:... | module:Class "
        "| file.py:Class",
    )
    sp.add_argument("--episodes", type=int, default=10, help="episodes to play (with --split: tasks of the split)")
    sp.add_argument("--seed", type=int, default=0, help="first reset seed (episode i uses seed+i)")
    sp.add_argument(
        "--split",
        help="data split of a data-backed env (e.g. valid_unseen): plays its tasks seed, seed+1, ... in order "
        "(default: none, seeded episodes)",
    )
    sp.add_argument("--log", help="JSONL episode log (appended; resumed from unless --no-resume) (default: none)")
    sp.add_argument("--no-resume", action="store_true", help="replay every episode even if the log already holds it")
    sp.add_argument("--batch-size", type=int, default=8, help="envs played at once")
    sp.add_argument("--env-kwarg", action="append", metavar="KEY=VALUE", help=ENV_KWARG_HELP)
    sp.add_argument("--quiet", action="store_true", help="no progress bar")
    # Model agents and parallel envs (AGENTS): see agentgym.agents.from_spec and agentgym.envpool.
    sp.add_argument(
        "--base-url", help="OpenAI-compatible server for openai:MODEL (default: $OPENAI_BASE_URL or OpenAI's)"
    )
    sp.add_argument("--temperature", type=float, help="sampling temperature of model agents (default 0.4)")
    sp.add_argument("--max-new-tokens", type=int, help="response length cap of model agents (default 512)")
    sp.add_argument("--history-length", type=int, help="past turns in the prompt (default 2; -1 = all)")
    sp.add_argument("--style", help="prompt style, e.g. erl for Sokoban/FrozenLake (default: the env's first)")
    sp.add_argument(
        "--threads", type=int, help="CPU threads of hf: models (default: OMP_NUM_THREADS, else idle cores)"
    )
    sp.add_argument(
        "--env-backend",
        default="inprocess",
        choices=["inprocess", "async", "ray"],
        help="where envs run: in this process, in subprocesses (async) or Ray actors",
    )
    sp.add_argument("--num-workers", type=int, default=1, help="env processes/actors for async/ray")
    sp.add_argument("--trials", type=int, default=1, help="Reflexion trials per task (reflexion agents only)")
    sp.add_argument(
        "--tool-calls", action="store_true", help="openai:MODEL acts through the env's tools (OpenAI tool calls)"
    )
    sp.set_defaults(fn=cmd_eval)

    sp = _parser(sub, "data", "download, prepare or verify a data set; write expert trajectories (SFT data)")
    sp.add_argument(
        "action",
        choices=["download", "prepare", "verify", "expert-trajectories"],
        help="download (needs internet), prepare --from DIR, verify the files against the sha256 manifest, "
        "or expert-trajectories (play the env's expert, write an episode log for baselines/sft.py)",
    )
    sp.add_argument(
        "family", nargs="?", help="alfworld | webshop | hotpotqa (verify: default all); expert-trajectories: an env id"
    )
    sp.add_argument("--from", dest="source", help="local copy to prepare from (needed by prepare)")
    sp.add_argument("--compile", action="store_true", help="alfworld: compile a split's games into the disk cache")
    sp.add_argument("--split", help="with --compile: the split (default: train)")
    sp.add_argument("--dest", help="data root (default: $AGENTGYM_DATA or the per-user data dir)")
    # expert-trajectories (SFT data for baselines/sft.py): episode i resets with seed+i
    sp.add_argument("--episodes", type=int, default=100, help="expert-trajectories: episodes to play")
    sp.add_argument("--seed", type=int, default=0, help="expert-trajectories: first reset seed (evals use 100000+)")
    sp.add_argument("--out", help="expert-trajectories: JSONL episode log to write (appended, resumed)")
    sp.add_argument("--env-kwarg", action="append", metavar="KEY=VALUE", help="expert-trajectories: gym.make kwarg")
    sp.add_argument("--quiet", action="store_true", help="expert-trajectories: no progress bar")
    sp.set_defaults(fn=cmd_data)

    for name, (_, help_text) in DELEGATED.items():
        sp = sub.add_parser(name, help=help_text, add_help=False)
        sp.add_argument("rest", nargs=argparse.REMAINDER)
        sp.set_defaults(fn=None)
    return p


ENV_KWARG_HELP = "env constructor argument, value parsed as JSON else kept as text (repeatable, e.g. size=8)"


def _one_line(exc: BaseException, argv: Sequence[str]) -> str | None:
    """The message of a known failure, with what to do next; None for anything else (a bug: show it)."""
    from agentgym.data import DataFileError, DataNotFoundError, DownloadError
    from agentgym.episodes import LogFormatError

    if isinstance(exc, (DataNotFoundError, DataFileError, DownloadError)):
        return str(exc)
    if getattr(exc, "user_error", False):  # the library marks errors whose message already says what to do
        return " ".join(str(exc).split())
    if isinstance(exc, LogFormatError):
        return (
            f"{exc}. Fix or delete that line (each line is one episode), or start afresh with --no-resume "
            "or another --log."
        )
    name, module = type(exc).__name__, type(exc).__module__
    if module.startswith("openai") and name in ("APIConnectionError", "APITimeoutError"):
        url = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--base-url"), None)
        url = url or os.environ.get("OPENAI_BASE_URL") or "the default OpenAI URL"
        return (
            f"cannot reach the model server at {url} ({name}): start one (`agentgym serve --model PATH` or "
            "`python -m agentgym.models.serve --model PATH`) or fix --base-url"
        )
    if module.startswith("gymnasium") and name == "DependencyNotInstalled":
        return str(exc)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("AGENTGYM_DEBUG") == "1"
    argv = [a for a in argv if a != "--debug"]  # accepted anywhere, delegated subcommands included
    # Library warnings (a cut log tail, ...) reach the user as one line each.
    logging.basicConfig(level=logging.WARNING, format="agentgym: %(message)s")
    if not debug:  # a warning is one line too (its source line and file position only help a developer)
        warnings.showwarning = lambda message, category, *rest, **kw: print(
            f"agentgym: {category.__name__}: {message}", file=sys.stderr
        )
    try:
        # Delegated subcommands take their own flags (``--help`` included), so hand them everything after the name.
        if argv and argv[0] in DELEGATED:
            try:
                fn = DELEGATED[argv[0]][0]()
            except ImportError as exc:
                if debug:
                    raise
                raise SystemExit(f"`agentgym {argv[0]}` is unavailable: {exc}") from exc
            return int(fn(argv[1:]) or 0)
        args = build_parser().parse_args(argv)
        return int(args.fn(args) or 0)
    except BrokenPipeError:  # `agentgym list | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except SystemExit as exc:
        if debug and not isinstance(exc.code, int | None):  # a one-line exit: --debug shows where it came from
            traceback.print_exception(exc)
        raise
    except Exception as exc:
        message = _one_line(exc, argv)
        if message is None or debug:
            raise
        print(f"agentgym: error: {message}", file=sys.stderr)
        print("(run with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
