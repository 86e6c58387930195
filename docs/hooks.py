"""mkdocs hook: pages generated from the code, so the docs cannot drift from it.

- ``envs.md``: a section per env class registered under ``agentgym/`` (its ids and settings, then the class
  docstring through mkdocstrings);
- ``cli.md``: the ``--help`` of every ``agentgym`` subcommand, captured from the parsers themselves.
"""

from __future__ import annotations

import contextlib
import io
import os


def _envs_markdown() -> str:
    import gymnasium as gym

    import agentgym  # noqa: F401

    by_class: dict[str, list[str]] = {}
    for env_id, spec in sorted(gym.registry.items()):
        if env_id.startswith("agentgym/") and isinstance(spec.entry_point, str):
            by_class.setdefault(spec.entry_point.replace(":", "."), []).append(env_id)
    parts = []
    for path, ids in sorted(by_class.items(), key=lambda kv: kv[1][0]):
        rows = []
        for env_id in ids:
            spec = gym.spec(env_id)
            settings = ", ".join(f"`{k}={v!r}`" for k, v in (spec.kwargs or {}).items()) or "defaults"
            rows.append(f"| `{env_id}` | {spec.max_episode_steps or 'none'} | {settings} |")
        parts.append(
            f"## `{path.rsplit('.', 1)[1]}`\n\n| id | step limit | settings |\n|---|---|---|\n"
            + "\n".join(rows)
            + f"\n\n::: {path}\n    options:\n      show_root_heading: false\n      members: false\n"
        )
    return "\n".join(parts)


def _help(argv: list[str]) -> str:
    from agentgym.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        main([*argv, "--help"])
    return buf.getvalue().rstrip()


#: The commands whose --help the CLI reference shows, in order.
CLI_PAGES = [
    [],
    ["list"],
    ["play"],
    ["eval"],
    ["data"],
    ["train"],
    ["train", "grpo"],
    ["submit"],
    ["leaderboard"],
    ["leaderboard", "verify"],
    ["leaderboard", "build"],
    ["webshop", "serve"],
]


def _cli_markdown() -> str:
    os.environ.setdefault("COLUMNS", "100")
    out = []
    for argv in CLI_PAGES:
        title = " ".join(["agentgym", *argv])
        out.append(f"## `{title}`\n\n```text\n{_help(argv)}\n```\n")
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!-- generated: envs -->" in markdown:
        markdown = markdown.replace("<!-- generated: envs -->", _envs_markdown())
    if "<!-- generated: cli -->" in markdown:
        markdown = markdown.replace("<!-- generated: cli -->", _cli_markdown())
    return markdown
