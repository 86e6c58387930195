"""docs/cpu-path.md is rendered from its records: a figure that differs from its record fails here."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import cpu_path_note  # noqa: E402


def test_the_page_is_what_its_records_render():
    assert (ROOT / "docs" / "cpu-path.md").read_text() == cpu_path_note.render(), (
        "docs/cpu-path.md differs from its records: run `python tools/cpu_path_note.py`"
    )


def test_every_record_it_renders_is_there():
    for name in ("threads.json", "phases.json", "phases_fp32.json", "run_folder.json"):
        assert (ROOT / "docs" / "figures" / name).exists(), name
