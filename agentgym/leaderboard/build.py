"""Build the board (``agentgym leaderboard build``): verify every entry, then write the README and the site.

The tier of an entry (see :data:`agentgym.leaderboard.table.TIERS`) is decided here, on the maintainer's
machine, on every build:

1. :func:`agentgym.leaderboard.verify.verify_cached` replays every episode of the entry in full (a
   cached verdict is reused only for exactly the same bytes, verifier version and agentgym sources; the
   cache lives in ``$AGENTGYM_CACHE``, never in the entry). Passing gives *replay-verified*.
2. :func:`agentgym.leaderboard.rerun.check_rerun` (cached the same way) checks the maintainer's rerun record, if any, and
   recomputes its scores and test. A rerun that checks out and agrees gives *re-run verified*; one that
   disagrees adds the flag "not reproduced on fresh seeds" and shows both numbers.

Nothing an entry holds (``verification.json``, a sampled run) can raise its tier.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from agentgym.leaderboard.rerun import check_rerun_cached
from agentgym.leaderboard.schema import write_schema
from agentgym.leaderboard.table import load_entries, load_reported, render_readme
from agentgym.leaderboard.verify import verify_cached

NOT_REPRODUCED = "not reproduced on fresh seeds"
RERUN_BROKEN = "rerun record does not check out"


def entry_status(
    folder: Path, *, cache_dir: Path | None = None, workers: int = 1, problems: list[str] | None = None
) -> dict[str, Any]:
    """The build's verdict on one entry: ``{"tier", "flags", "rerun", "verification"}``."""
    record = verify_cached(folder, cache_dir=cache_dir, workers=workers)
    flags: list[str] = []
    rerun_results: dict[str, dict[str, float]] = {}
    tier = "submitted"
    if record["ok"]:
        tier = "replay-verified"
    elif problems is not None:
        first = record["errors"][0] if record["errors"] else "rejected"
        problems.append(f"{folder.name}: not verified by the full replay: {first}")
    rerun = check_rerun_cached(folder, workers=workers, cache_dir=cache_dir) if record["ok"] else None
    if rerun is not None:
        rerun_results = {
            env: {k: v for k, v in res.items() if k not in ("episodes", "failed")}
            for env, res in rerun["results"].items()
        }
        if not rerun["ok"]:
            flags.append(RERUN_BROKEN)
            if problems is not None:
                problems.append(f"{folder.name}: {RERUN_BROKEN}: {rerun['errors'][0]}")
        elif rerun["flagged"]:
            flags.append(NOT_REPRODUCED)
        else:
            tier = "rerun-verified"
    verification = dict(record)
    if rerun is not None:
        verification["rerun"] = {k: rerun[k] for k in ("ok", "flagged", "errors", "results", "comparison")}
        rec = rerun.get("record") or {}
        verification["rerun"].update(
            {
                k: rec.get(k)
                for k in ("rerun_at", "rerun_by", "agent_spec", "agent_seed", "seconds", "agentgym_version")
            }
        )
        verification["rerun"]["seeds"] = {env: v.get("seeds", []) for env, v in (rec.get("envs") or {}).items()}
    return {"tier": tier, "flags": flags, "rerun": rerun_results, "verification": verification}


def build(
    root: str | Path,
    *,
    site_dir: Path | None = None,
    readme: Path | None = None,
    cache_dir: Path | None = None,
    workers: int = 2,
    updated: str | None = None,
) -> dict[str, Any]:
    """Verify every entry in full, then render ``root/README.md``, the schema and the site under ``root/site``.

    Args:
        root: the ``leaderboards/`` folder.
        site_dir: site output folder (default ``root/site``).
        readme: README output (default ``root/README.md``).
        cache_dir: where verdicts are cached (default ``$AGENTGYM_CACHE/leaderboard-verify``).
        workers: replay processes.
        updated: the "last updated" date shown (default: today, UTC).

    Returns:
        ``{"readme": path, "site": folder, "pages": count, "rows": count, "problems": [...], "tiers": {slug: tier}}``.
    """
    from agentgym.leaderboard.site import render_site

    root = Path(root)
    readme = readme or root / "README.md"
    site_dir = site_dir or root / "site"
    updated = updated or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    problems: list[str] = []

    def status(folder: Path) -> dict[str, Any]:
        return entry_status(folder, cache_dir=cache_dir, workers=workers, problems=problems)

    rows = load_entries(root / "entries", problems, status)
    for r in rows:  # logs are linked where they lie, relative to the site
        r.logs = [os.path.relpath(root / "entries" / r.slug / "episodes" / Path(p).name, site_dir) for p in r.logs]
        r.logs = [p.replace(os.sep, "/") for p in r.logs]
    reported, tables = load_reported(root / "reported", problems)
    rows += reported
    readme.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text(render_readme(rows, tables, problems, updated=updated), encoding="utf-8")
    write_schema(root / "schema" / "submission.schema.json")
    pages = render_site(rows, site_dir, root / "entries", problems, updated=updated)
    return {
        "readme": readme,
        "site": site_dir,
        "pages": pages,
        "rows": len(rows),
        "problems": problems,
        "tiers": {r.slug: r.source for r in rows if r.source != "reported"},
    }
