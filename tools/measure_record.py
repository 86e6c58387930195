"""The JSON record a measuring tool writes (DESIGN.md: value, versions, date, machine, command)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def provenance(script: str, argv: list[str] | None) -> dict:
    """Date, machine (with its load now), versions (git commit included) and the command line of a measurement."""
    sys.path.insert(0, str(ROOT))
    from agentgym.rl.runinfo import versions

    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "logical_cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "versions": {k: v for k, v in versions("cpu").items() if k != "argv"},
        "command": f"python {script} " + " ".join(sys.argv[1:] if argv is None else argv),
    }


def write_record(out: str | Path, record: dict, script: str, argv: list[str] | None) -> Path:
    """Write ``record`` plus date, machine, versions and the command line to ``out`` (relative: to the checkout)."""
    full = {**record, **provenance(script, argv)}
    path = ROOT / out
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(full, indent=2) + "\n")
    print(f"record written to {path}")
    return path
