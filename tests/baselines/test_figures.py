"""``make figures`` (tools/figures.py) can rewrite every generated section, and renders what it was given."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _figures():
    spec = importlib.util.spec_from_file_location("figures", ROOT / "tools" / "figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(method: str, seed: int, val: float) -> dict:
    return {"method": method, "seed": seed, "val": val, "cpu_s": 1.0, "history": []}


DATA = {
    "command": "make figures",
    "date": "2026-01-01",
    "versions": "Python 3.11",
    "wall_s": 12.0,
    "cpu_s": 20.0,
    "workers": 2,
    "runs": {
        "grpo": [_run("grpo", s, v) for s, v in enumerate([1.0, 0.9, 0.85, 0.8, 0.7])],
        "erl": [_run("erl", s, v) for s, v in enumerate([1.0, 1.0, 1.0, 1.0, 0.4])],
    },
}


def test_every_generated_section_has_its_markers():
    """Every block main() rewrites has its marker pair exactly once in its file (else `make figures` stops)."""
    for path, name, _ in _figures().blocks():
        text = path.read_text()
        assert text.count(f"<!-- figures:{name} -->") == 1 and text.count(f"<!-- /figures:{name} -->") == 1, (
            path,
            name,
        )


def test_table_shows_every_seed_spread_and_verdict():
    fig = _figures()
    table = fig.render(DATA, DATA["command"])
    grpo = next(line for line in table.splitlines() if line.startswith("| GRPO"))
    assert re.search(r"1\.00 \| 0\.90 \| 0\.85 \| 0\.80 \| 0\.70 \| 0\.85 \| 0\.70-1\.00 \|", grpo)
    assert grpo.endswith("| yes |")  # 4 of 5 >= 0.8, none < 0.5
    assert next(line for line in table.splitlines() if line.startswith("| ERL")).endswith("| **no** |")  # 0.4 < 0.5
    assert "`make figures` (2026-01-01; Python 3.11; wall 12 s with 2 worker processes" in table


def test_rewrite_replaces_only_between_the_markers():
    fig = _figures()
    text = "a\n<!-- figures:x -->\nold\n<!-- /figures:x -->\nb\n"
    assert fig.rewrite(text, "x", "new") == "a\n<!-- figures:x -->\nnew\n<!-- /figures:x -->\nb\n"
