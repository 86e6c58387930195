"""Every figure the docs quote is rendered from a committed record (docs/figures/*.json) by tools/figures.py.

A block between ``<!-- figures:NAME -->`` markers that differs from what its record gives fails here (run
``python tools/figures.py --render``); so does a CPU-table record that no longer matches the board entries it was
collected from (``--collect``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fig():
    spec = importlib.util.spec_from_file_location("figures", ROOT / "tools" / "figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_rendered_block_matches_its_record(fig):
    stale = fig.render_all(write=False)
    assert stale == [], f"{stale} differ from their records: run `python tools/figures.py --render`"


def test_the_cpu_table_record_holds_what_the_board_entries_hold(fig):
    record = json.loads(fig.CPU_TABLE.read_text())
    fresh = fig.collect_cpu_table()
    assert fresh["runs"] == record["runs"], "the entries changed: run `python tools/figures.py --collect`"


def test_a_cpu_path_figure_edited_by_hand_is_reported(fig, tmp_path, monkeypatch):
    page = tmp_path / "cpu-path.md"
    text = fig.CPU_PATH_PAGE.read_text()
    threads = json.loads((fig.JSON.parent / "threads.json").read_text())
    one = f"| one thread | 1 | {threads['runs']['one thread']['median_s']:.1f} |"
    assert one in text
    page.write_text(text.replace(one, "| one thread | 1 | 0.5 |"))
    monkeypatch.setattr(fig, "CPU_PATH_PAGE", page)
    assert fig.render_all(write=False) == [f"{page}:cpu-threads"]


def test_every_record_names_its_command_date_machine_and_versions(fig):
    cpu = json.loads(fig.CPU_TABLE.read_text())
    assert cpu["command"] and cpu["date"] and cpu["machine"] and cpu["versions"]
    learning = json.loads(fig.JSON.read_text())
    assert learning["command"] and learning["date"] and learning["versions"]
    timings = json.loads(fig.TIMINGS.read_text())
    assert timings["how"]
    for t in timings["values"]:
        assert t["command"] and t["date"] and t["commit"] and t["machine"] and t["seconds"] > 0, t
        assert "measured_by" in t or "typed in by hand" in t["source"], t  # a hand entry says so
    others = [
        *[path for paths in fig.CONTEXT_ROWS.values() for path in paths],
        *fig.MECHANISM_PROBES.values(),
        *fig.SOKOBAN_PROBES.values(),
        *fig.SEED_COMPARISONS.values(),
        *fig.SAPO_TIMINGS.values(),
    ]
    for path in [p for p in others if p.exists()]:
        rec = json.loads(path.read_text())
        assert rec["command"] and rec["date"] and rec["machine"] and rec["versions"]["git_commit"], path


@pytest.fixture
def timings(fig, tmp_path, monkeypatch):
    """A copy of the timings record that ``--time`` writes to (the real README is not rewritten)."""
    path = tmp_path / "timings.json"
    path.write_text(fig.TIMINGS.read_text())
    monkeypatch.setattr(fig, "TIMINGS", path)
    monkeypatch.setattr(fig, "render_all", lambda write=True: [])
    return path


def test_time_runs_the_command_and_records_its_seconds_exit_code_and_pytest_summary(fig, timings, capsys):
    before = json.loads(timings.read_text())
    argv = ["--time", "make test", "--", sys.executable, "-c", "print('header'); print('3 passed, 1 skipped in 0.1s')"]
    assert fig.main(argv) == 0
    assert "3 passed, 1 skipped in 0.1s" in capsys.readouterr().out  # the command's output is shown as it runs
    record = json.loads(timings.read_text())
    t = next(t for t in record["values"] if t["name"] == "make test")
    assert t["what"] == "the default test run, what CI runs"  # kept from the entry it replaces
    assert t["result"] == "3 passed, 1 skipped" and t["pytest_summary"] == "3 passed, 1 skipped in 0.1s"
    assert t["exit_code"] == 0 and 0 < t["seconds"] < 60 and t["cpu_s"] >= 0
    assert t["command"].startswith(sys.executable) and t["measured_by"].startswith("python tools/figures.py --time")
    assert t["date"] and t["commit"] and t["machine"] and t["versions"]["python"]
    assert "source" not in t and [v["name"] for v in record["values"]].count("make test") == 1
    row = next(line for line in fig.render_timings(record).splitlines() if "`make test`" in line)
    assert row.endswith("s (3 passed, 1 skipped) |") and "by hand" not in row
    others = [v for v in record["values"] if v["name"] != "make test"]
    assert others == [v for v in before["values"] if v["name"] != "make test"]  # the other entries stay as they were
    rows = fig.render_timings(record).splitlines()
    for v in others:  # a hand entry still says so; a measured one does not
        row = next(line for line in rows if f"`{v['name']}`" in line)
        assert ("typed in by hand" in row) == ("measured_by" not in v), row


def test_time_records_a_failing_command_as_failed(fig, timings):
    argv = ["--time", "fails", "--what", "exits 3", "--", sys.executable, "-c", "raise SystemExit(3)"]
    assert fig.main(argv) == 3
    record = json.loads(timings.read_text())
    t = record["values"][-1]
    assert (t["name"], t["what"], t["exit_code"]) == ("fails", "exits 3", 3) and "result" not in t
    assert "failed: exit code 3" in fig.render_timings(record)


def test_time_refuses_a_new_name_without_what_and_a_missing_command(fig, timings):
    before = timings.read_text()
    with pytest.raises(SystemExit, match="say what it does with --what"):
        fig.main(["--time", "new", "--", sys.executable, "-c", "pass"])
    with pytest.raises(SystemExit, match="cannot run 'no-such-command-xyz'"):
        fig.main(["--time", "make demo", "--", "no-such-command-xyz"])
    with pytest.raises(SystemExit):
        fig.main(["--time", "make demo"])  # no command after --
    assert timings.read_text() == before


def test_wilson_interval_matches_the_textbook_values(fig):
    lo, hi = fig.wilson(64, 100)
    assert (round(lo, 3), round(hi, 3)) == (0.542, 0.727)
    assert fig.wilson(0, 100) == (0.0, pytest.approx(0.037, abs=1e-3))


def test_a_stage_row_shows_its_interval_its_seeds_and_gains_against_sft(fig):
    def run(stage, seed, solved):
        return {"suite": "sokoban", "stage": stage, "seed": seed, "episodes": 10, "successes": len(solved),
                "solved": solved, "temperature": 0.4, "invalid_rate": 0.0, "tokens_per_episode": 100.0}  # fmt: skip

    record = {
        "date": "2026-01-01", "versions": "v", "machine": "m",
        "runs": [run("SFT", None, [1, 2, 3]), run("SFT+GiGPO", 1, [1, 2, 3, 4]), run("SFT+GiGPO", 2, [2, 5])],
    }  # fmt: skip
    table = fig.render_cpu_table(record, "sokoban")
    sft = next(line for line in table.splitlines() if line.startswith("| SFT |"))
    lo, hi = fig.wilson(3, 10)
    assert f"0.30 [{lo:.2f}, {hi:.2f}]" in sft
    rl = next(line for line in table.splitlines() if line.startswith("| SFT+GiGPO |"))
    assert "0.30 (0.20-0.40, 2 seeds)" in rl and "0.40, 0.20" in rl
    assert "+1/-0, +1/-2" in rl  # seed 1 gains board 4; seed 2 gains 5, loses 1 and 3


def test_the_seed_comparison_block_shows_seeds_sign_tests_pending_runs_and_mechanisms(fig):
    heldout = {
        "t0.4": {"per_seed": {"1": 0.7, "2": 0.6}, "mean": 0.65, "spread": 0.05,
                 "against_grpo": {"rl_seeds": 2, "wins": 9, "losses": 3, "p": 0.146}},
        "greedy": {"per_seed": {"1": 0.6}, "mean": 0.6, "spread": 0.0,
                   "against_grpo": {"rl_seeds": 0, "wins": 0, "losses": 0, "p": 1.0}},
    }  # fmt: skip
    record = {
        "suite": "frozenlake-notslippery", "sft": {"t0.4": 0.66, "greedy": 0.59}, "pending": ["erl seed 3"],
        "stages": [{"method": "seed", "label": "SFT+SEED", "heldout": heldout, "episodes_trained": 192.0,
                    "s_per_iteration": None,
                    "mechanism": {"seed/lesson_gap": {"seeds": [1.0, 2.0], "mean": [0.1, -0.05], "last": [0.2, 0.0]}}}],
        "command": "python tools/cpu_table.py ...", "date": "2026-01-01", "machine": "m",
        "versions": {"git_commit": "0123456789", "python": "3", "torch": "t", "transformers": "tf"},
    }  # fmt: skip
    text = fig.render_seed_comparison(record)
    row = next(line for line in text.splitlines() if line.startswith("| SFT+SEED | s1"))
    assert "s1 0.70, s2 0.60" in row and "0.65 (0.05)" in row and "+9/-3, p=0.15" in row and "| 192 |" in row
    sft = next(line for line in text.splitlines() if line.startswith("| SFT start"))
    assert [c.strip() for c in sft.strip("|").split("|")] == ["SFT start", "", "0.66", "", "0.59", "", "", ""]
    assert len(row.strip("|").split("|")) == 8 and "Not run yet: erl seed 3." in text
    assert "| SFT+SEED | conditioned minus free | s1 0.10 / 0.20, s2 -0.05 / 0.00 |" in text
    assert "(at 0123456" in text
    assert "training seeds" not in text  # the SFT stage retrained with one seed only
    assert "fresh machine" not in text  # no rebuild of the start recorded
    rebuild = {"started": "2026-12-07 07:03:15", "date": "2026-12-07", "versions": {"torch": "2.13.0+cpu"}}
    record.update(sft_sha256="1e6bd6bd8483e659", sft_rebuilds=[rebuild])
    assert "from one SFT checkpoint (start 1e6bd6bd8483: its weights' SHA-256);" in fig.render_seed_comparison(record)
    assert (
        "The SFT start (SHA-256 1e6bd6bd8483) was retrained from its command on a fresh machine once "
        "(run started 2026-12-07 07:03:15, torch 2.13.0+cpu) and gave the same weights"
    ) in fig.render_seed_comparison(record)
    del record["sft_sha256"], record["sft_rebuilds"]
    record["sft_seed"] = 1
    record["sft_seeds"] = {"t0.4": {"per_seed": {"1": 0.66, "2": 0.6}, "mean": 0.63, "spread": 0.03}}
    seeds = next(line for line in fig.render_seed_comparison(record).splitlines() if "training seeds" in line)
    cells = [c.strip() for c in seeds.strip("|").split("|")]
    assert cells == [
        "SFT stage, training seeds (the start is s1)",
        "s1 0.66, s2 0.60",
        "0.63 (0.03)",
        "",
        "n/a",
        "",
        "",
        "",
    ]
    val = {
        "lesson_parse_rate": 1.0,
        "lesson_episodes": 8.0,
        "reflection_tagged_rate": 0.25,
        "reflection_episodes": 4.0,
    }
    record["sft_validation"] = {
        "1": val | {"success_rate": 0.8},
        "2": val | {"success_rate": 0.9, "lesson_parse_rate": 0.5},
    }
    text = fig.render_seed_comparison(record)
    assert "8 held-out noisy-expert episodes; reflections on the 4 that failed" in text
    assert "lessons that parse s1 1.00, s2 0.50; reflections in their tags s1 0.25, s2 0.25" in text
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "lessons that parse" in line)
    assert lines[at - 1] == "" and lines[at - 2].startswith("| SFT+SEED | s1")  # after the held-out table, not in it


def test_the_verdict_against_grpo_needs_the_sign_test_and_the_seed_ranges_apart(fig):
    def stage(method: str, per_seed: dict, wins: int = 0, losses: int = 0, p: float = 1.0) -> dict:
        g = {"rl_seeds": len(per_seed), "wins": wins, "losses": losses, "p": p}
        return {"method": method, "label": f"SFT+{method.upper()}", "heldout": {"t0.4": {"per_seed": per_seed,
                "against_grpo": g}}}  # fmt: skip

    grpo = stage("grpo", {"1": 0.60, "2": 0.62, "3": 0.58})
    apart = stage("erl", {"1": 0.70, "2": 0.72, "3": 0.69}, 30, 5, 0.00002)
    overlapping = stage("seed", {"1": 0.70, "2": 0.61, "3": 0.69}, 30, 5, 0.00002)
    chance = stage("sapo", {"1": 0.70, "2": 0.72, "3": 0.69}, 12, 8, 0.5)
    one = stage("gigpo", {"1": 0.80}, 20, 2, 0.0001)
    stages = [grpo, apart, overlapping, chance, one]
    says = {st["method"]: fig.seed_verdict(st, stages, "t0.4") for st in stages}
    assert says["grpo"] == ""  # GRPO is the reference, not a row of its own
    assert says["erl"].endswith("better than GRPO beyond the seed spread.") and "+0.10" in says["erl"]
    assert "0.69-0.72 against GRPO's 0.58-0.62 over RL seeds 1, 2, 3; tasks +30/-5" in says["erl"]
    assert says["seed"].endswith("better on the pooled tasks, but within the seed spread.")  # a seed in GRPO's range
    assert says["sapo"].endswith("no difference beyond the seed spread.")  # ranges apart, p large
    assert "not yet the methods" in says["gigpo"] and "over RL seed 1;" in says["gigpo"]
    record = {"suite": "s", "sft": {"t0.4": 0.5}, "pending": [], "stages": stages, "command": "c", "date": "d",
              "machine": "m", "versions": {"git_commit": "0123456789", "python": "3", "torch": "t",
                                           "transformers": "tf"}}  # fmt: skip
    for st in stages:
        st.update(episodes_trained=None, s_per_iteration=None, mechanism={})
    text = fig.render_seed_comparison(record)
    assert f"- {says['erl']}" in text and "Against GRPO at t0.4, the RL seeds pooled:" in text
    assert "the method it varies" not in text  # no variant in this table
    # a variant (cpu_table.VARIANT_OF) is paired with the method it varies too, under its own heading
    variant = stage("erl-x", {"1": 0.60, "2": 0.63, "3": 0.59}, 6, 8, 0.79)
    variant.update(label="SFT+ERL without X", episodes_trained=None, s_per_iteration=None, mechanism={})
    variant["heldout"]["t0.4"]["against_base"] = {"method": "erl", "rl_seeds": 3, "wins": 1, "losses": 11, "p": 0.0063}
    says = fig.seed_verdict(variant, [*stages, variant], "t0.4", against="erl")
    assert says == (
        "SFT+ERL without X: -0.10 (0.59-0.63 against SFT+ERL's 0.69-0.72 over RL seeds 1, 2, 3; tasks +1/-11, "
        "p=0.0063): worse than SFT+ERL beyond the seed spread."
    )
    text = fig.render_seed_comparison({**record, "stages": [*stages, variant]})
    assert f"Each variant against the method it varies, at t0.4:\n\n- {says}" in text
    assert "played GRPO's episodes" not in text  # no record of it: no line
    apart["same_rollouts_as_grpo"], overlapping["same_rollouts_as_grpo"] = {"1": 1, "2": 0, "3": 6}, {"1": 2}
    text = fig.render_seed_comparison(record)
    assert "turns and invalid actions): SFT+ERL s1 1, s2 0, s3 6; SFT+SEED s1 2." in text


def test_the_sapo_time_block_splits_each_iteration_and_gives_the_ratio(fig):
    phases = ("generation_s", "old_logprob_s", "ref_logprob_s", "critic_s", "update_s")
    ppo = dict(zip(phases, (45.0, 10.0, 5.0, 15.0, 25.0), strict=True), iteration_s=100.0, turns=80.0)
    sapo = dict(zip(phases, (45.0, 10.0, 5.0, 0.0, 20.0), strict=True), iteration_s=80.0, turns=80.0)
    record = {
        "results": {"ppo": ppo, "sapo": sapo}, "dtype": "float32", "command": "python tools/gpu_check.py ...",
        "date": "2026-01-01", "machine": "m", "versions": {"git_commit": "abcdef0123", "torch": "t", "transformers": "tf"},
    }  # fmt: skip
    text = fig.render_sapo_time(record)
    assert "| critic | 15.0 | 0.0 |" in text and "| iteration | 100.0 | 80.0 |" in text
    assert "| reference log-probs | 5.0 | 5.0 |" in text  # the phases add up to the iteration
    assert "x0.80 (-20%)" in text and "update + critic: x0.50" in text
    assert "m, float32;" in text  # no thread count recorded (a GPU run): none shown
    assert "m, 1 thread, float32;" in fig.render_sapo_time(record | {"threads": 1})


def test_the_readout_probe_block_sets_sapos_readout_against_the_best_linear_one(fig):
    ridge = {"1": {"corr": 0.31, "ev": 0.09}, "100": {"corr": 0.42, "ev": 0.17}}
    value = {
        "episodes": 256,
        "turns": 1500,
        "success_rate": 0.7,
        "return_mean": 0.6,
        "return_std": 0.4,
        "readout_corr": 0.05,
        "readout_ev": -0.01,
        "folds": 5,
        "ridge": ridge,
        "best_ridge": "100",
    }
    record = {
        "value": {"readout": value}, "command": "python tools/mechanism_probe.py ...", "date": "2026-01-01",
        "machine": "m", "versions": {"git_commit": "abcdef0123"},
    }  # fmt: skip
    text = fig.render_readout_probe(record)
    assert "| SAPO's read-out as RL starts (two new random rows) | 0.05 | -0.01 |" in text
    assert "| the best linear read-out (ridge 100, 5-fold over episodes) | 0.42 | 0.17 |" in text
    assert "1 0.31, 100 0.42" in text


def entry(text: str, head: str) -> str:
    """One entry of the README's seed-methods summary (its heading line and its points), as one line."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"- **{head}"))
    end = next((i for i in range(at + 1, len(lines)) if not lines[i].startswith("  - ")), len(lines))
    return " ".join(line.strip() for line in lines[at:end])


def test_the_readme_seed_summary_says_what_ran_and_what_did_not(fig):
    probes = {name: json.loads(path.read_text()) for name, path in fig.MECHANISM_PROBES.items()}
    before = fig.render_seed_methods(probes, None, None)
    assert before.lower().count("after rl: not run yet") == 5  # SEED, SEED oracle, ERL, ERL oracle, SAPO
    oracle = probes["privileged (oracle) text"]["value"]["seed"]
    assert (
        f"privileged lessons: {100 * oracle['lesson_conditioned_success']:.0f}% lesson-conditioned against "
        f"{100 * oracle['lesson_free_success']:.0f}% lesson-free" in before
    )
    # with the paired probe over more tasks: its gain, computed from the recorded pairs
    pairs = [{"conditioned": 1.0, "free": 0.5, "lesson_from_success": 0.0}, {"conditioned": 0.0, "free": 0.5,
             "lesson_from_success": 0.0}, {"conditioned": 1.0, "free": 1.0, "lesson_from_success": 1.0}]  # fmt: skip
    effects = {"seed-oracle": {"value": {"lessons": {"pairs": pairs}}, "command": "python tools/mechanism_probe.py L"}}
    paired = fig.render_seed_methods(probes, None, None, effects=effects)
    assert "over 3 tasks, paired by task, the gain is +0.00 (SE 0.29, p=1)" in paired
    assert "+0.00 (SE 0.50, p=1) where the lesson is about a failed episode" in paired
    assert "`python tools/mechanism_probe.py L`" in paired
    refl = {"tasks": 2, "pairs": [{"conditioned": 1.0, "free": 0.5}, {"conditioned": 1.0, "free": 0.0}],
            "better_first_move_rate_second_attempts": 0.9, "better_first_move_rate_first_attempts": 0.3}  # fmt: skip
    effects["erl-plans-oracle"] = {"value": {"reflections": refl}, "command": "python tools/mechanism_probe.py R"}
    erl = entry(fig.render_seed_methods(probes, None, None, effects=effects), "ERL")
    assert (
        "Over 2 tasks (2 failed first attempts), paired with the task's other first attempts: second attempts " in erl
    )
    assert "succeed 100% against 25% (gain +0.75, SE 0.25, p=0.0027); the better first move 90% against 30%." in erl
    effects["erl-lessons-oracle"] = {"value": {"reflections": refl}, "command": "python tools/mechanism_probe.py O"}
    erl = entry(fig.render_seed_methods(probes, None, None, effects=effects), "ERL")
    assert (
        "30%. - From the plan-reading recipe with lesson rows at the cells a lesson does not name too, over 2 tasks "
        "(2 failed first attempts)" in erl
    )

    def stage(method, mean, mech=None):
        h = {"per_seed": {"1": mean, "2": mean}, "mean": mean, "spread": 0.0}
        if method != "grpo":
            h["against_grpo"] = {"rl_seeds": 2, "wins": 12, "losses": 4, "p": 0.0768}
        return {"method": method, "heldout": {"t0.4": h}, "mechanism": mech or {}}

    corr = {"sapo/value_return_corr": {"seeds": [1.0, 2.0], "mean": [0.2, 0.3], "last": [0.55, 0.61]}}
    comparison = {"stages": [stage("grpo", 0.6), stage("sapo", 0.7, corr)], "command": "python tools/cpu_table.py X"}
    timing = {"results": {"ppo": {"iteration_s": 100.0}, "sapo": {"iteration_s": 70.0}}, "command": "gpu_check Y"}
    after = fig.render_seed_methods(probes, comparison, timing)
    sapo = entry(after, "SAPO")
    assert (
        "0.20 / 0.55, 0.30 / 0.61" in sapo
        and "After RL (2 seeds): held-out 0.70 against GRPO's 0.60 (tasks +12/-4, sign test p=0.077): no difference "
        "beyond the seed spread."
        in sapo  # seeds apart from GRPO's, but the sign test is not below 0.05
    )
    assert "against PPO at the same batch: x0.70" in sapo and "`python tools/cpu_table.py X`" in after
    readout = {"value": {"readout": {"episodes": 256, "probe_corr": 0.347}}, "command": "mechanism_probe Z"}
    sapo = entry(fig.render_seed_methods(probes, comparison, timing, readout), "SAPO")
    assert "cross-validated over 256 episodes: 0.35." in sapo


def test_context_rows_block_shows_each_recipe_and_the_rows_only_the_text_decides(fig):
    def rec(rows, recipe="mech", **extra):
        v = {"rows": rows, "target_with_text": 0.5, "target_without_text": 0.25, "same_move_with_and_without": 0.75}
        return {
            "model": f"runs/{recipe}/sft_smollm2_frozenlake_{recipe}",
            "value": {"context_rows": {"reflection": {**v, **extra}}},
            "command": f"probe {rows}",
            "date": "2026-01-01",
            "machine": "m",
            "versions": {"git_commit": "abcdef0123"},
        }

    odd = {"rows_not_expert": 7, "target_with_text_not_expert": 0.857, "target_without_text_not_expert": 0.143}
    off = rec(
        30,
        "mech_lessons",
        rows_not_expert=0,
        rows_lesson_move_wrong=12,
        lesson_move_with_text=0.75,
        lesson_move_without_text=0.25,
    )
    off["value"]["context_rows"] = {"lesson_off_cell": off["value"]["context_rows"]["reflection"]}
    text = fig.render_context_rows([rec(42), rec(96, "mech_plans", **odd), off])
    # an older record: no split
    assert "| lesson/reflection SFT | a reflection | 42 | 50% | 25% | 75% | n/a | n/a | n/a | n/a |" in text
    assert "| plan-reading SFT | a reflection | 96 | 50% | 25% | 75% | 7 | 86% | 14% | n/a |" in text
    # a lesson where it does not apply: how often its move is played there, with it and without
    assert (
        "| plan-reading SFT, lessons at other cells too | a lesson, at a cell it does not name | 30 | 50% | 25% | 75% | 0 | n/a | n/a | 75% / 25% (12 rows) |"
        in text
    )
    assert "plan-reading SFT: `probe 96` (at abcdef0; 2026-01-01, m)." in text


def test_mechanism_probe_block_shows_where_second_attempts_end_where_a_record_has_it(fig):
    probes = {name: json.loads(path.read_text()) for name, path in fig.MECHANISM_PROBES.items()}
    old = next(iter(probes))
    new = json.loads(json.dumps(probes[old]))
    new["value"]["erl"].update(second_solved=21, second_same_mistake=5, second_other_mistake=41)
    text = fig.render_mechanism_probe({old: probes[old], "new": new})
    assert "| ERL: second attempts that solve the task | n/a | 21 |" in text
    assert "| ERL: second attempts that make the named mistake again | n/a | 5 |" in text
    assert "| ERL: second attempts that get past it and go wrong elsewhere | n/a | 41 |" in text
    assert "second attempts that solve" not in fig.render_mechanism_probe({old: probes[old]})
    new["value"]["writing"].update(lesson_parse_rate=0.75, lesson_unparsed_cut=0.25, lesson_unparsed_solved=0.1875)
    text = fig.render_mechanism_probe({old: probes[old], "new": new})
    assert "| lessons that do not parse: cut at the token budget | n/a | 25% |" in text
    assert "| lessons that do not parse: about a solved episode | n/a | 19% |" in text
    assert "do not parse" not in fig.render_mechanism_probe({old: probes[old]})


def test_the_readme_seed_summary_adds_the_plan_reading_comparison_when_it_has_run(fig):
    probes = {name: json.loads(path.read_text()) for name, path in fig.MECHANISM_PROBES.items()}

    def stage(method, mean, against=None):
        h = {"per_seed": {"1": mean}, "mean": mean, "spread": 0.0, **({"against_grpo": against} if against else {})}
        return {"method": method, "heldout": {"t0.4": h}, "mechanism": {}}

    plans = {
        "stages": [
            stage("grpo", 0.5),
            stage("erl-oracle", 0.75, {"rl_seeds": 1, "wins": 9, "losses": 2, "p": 0.0654}),
        ],
        "command": "python tools/cpu_table.py --sft mech_plans P",
    }
    text = fig.render_seed_methods(probes, None, None, None, plans)
    assert (
        "After RL from it (1 seed): held-out 0.75 against GRPO's 0.50 from the same start (tasks +9/-2, sign " in text
    )
    assert "`python tools/cpu_table.py --sft mech_plans P`" in text
    assert "After RL from it" not in fig.render_seed_methods(probes, None, None)
    pairs = [{"conditioned": 0.0, "free": 0.5, "lesson_from_success": 0.0}, {"conditioned": 1.0, "free": 1.0,
             "lesson_from_success": 1.0}, {"conditioned": 0.0, "free": 0.25, "lesson_from_success": 0.0}]  # fmt: skip
    effects = {"seed-plans-oracle": {"value": {"lessons": {"pairs": pairs}}, "command": "python tools/x.py S"}}
    seed = entry(fig.render_seed_methods(probes, None, None, None, plans, effects), "SEED")
    assert (
        "lesson-free. Over 3 tasks, paired by task, the gain is -0.25 (SE 0.14, p=0.083), -0.38 (SE 0.12, p=0.0027) where"
        in seed
    )
    effects["seed-lessons-oracle"] = {"value": {"lessons": {"pairs": pairs}}, "command": "python tools/x.py L"}
    seed = entry(fig.render_seed_methods(probes, None, None, None, plans, effects), "SEED")
    assert (
        "From the plan-reading recipe with lesson rows at the cells a lesson does not name too, over 3 tasks" in seed
    )
    assert "where the lesson is about a failed episode. After RL" not in seed  # that recipe's RL has not run
    lessons = {
        "stages": [stage("grpo", 0.71), stage("seed-oracle", 0.72, {"rl_seeds": 1, "wins": 1, "losses": 0, "p": 1.0})],
        "command": "python tools/cpu_table.py --sft mech_lessons L",
    }
    text = fig.render_seed_methods(probes, None, None, None, plans, effects, lessons)
    assert (
        "where the lesson is about a failed episode. After RL from it (1 seed): held-out 0.72 against GRPO's 0.71 "
        "from the same start (tasks +1/-0, sign test p=1): one RL seed: two checkpoints compared"
        in entry(text, "SEED")
    )
    assert "`python tools/cpu_table.py --sft mech_lessons L`" in text
    assert "second build" not in text
    # the recipe rebuilt on another CPU (other weights): its own probe, named by its weights, before the RL it started
    effects["seed-lessons-build2-oracle"] = {
        "value": {"lessons": {"pairs": pairs[:2]}}, "command": "python tools/x.py B", "model_sha256": "b33d8f01d98a" * 5
    }  # fmt: skip
    text = fig.render_seed_methods(probes, None, None, None, plans, effects, lessons)
    assert (
        "where the lesson is about a failed episode. Its second build (start b33d8f01d98a, the RL comparison's start): "
        "over 2 tasks, paired by task, the gain is -0.25 (SE 0.25, p=0.32), -0.50 (p=n/a) where the lesson is about a "
        "failed episode. After RL from it (1 seed)" in entry(text, "SEED")
    )
    assert "`python tools/x.py B`" in text


def test_the_paired_effects_block_computes_the_gain_from_the_recorded_pairs(fig):
    meta = {"date": "2026-01-01", "machine": "m", "versions": {"git_commit": "abcdef0123"}}
    lesson_pairs = [{"conditioned": 1.0, "free": 0.5, "lesson_from_success": 0.0}] * 3 + [
        {"conditioned": 1.0, "free": 1.0, "lesson_from_success": 1.0}
    ]
    lessons = {
        "value": {"lessons": {"analyser": "oracle", "tasks": 4, "group_size": 4, "pairs": lesson_pairs}},
        "model": "runs/mech/sft_smollm2_frozenlake_mech", "command": "python tools/mechanism_probe.py --lessons", **meta,
    }  # fmt: skip
    reflections = {
        "value": {"reflections": {"reflector": "oracle", "tasks": 8,
                                  "pairs": [{"conditioned": 1.0, "free": 0.0}, {"conditioned": 0.0, "free": 0.5}]}},
        "model": "runs/mech_plans/sft_smollm2_frozenlake_mech_plans",
        "command": "python tools/mechanism_probe.py --reflections", **meta,
    }  # fmt: skip
    off_cell = {**lessons, "model": "runs/mech_lessons/sft_smollm2_frozenlake_mech_lessons"}
    # a second build of the same recipe: its rows name the probed weights, as the RL comparison names its start
    rebuilt = {**off_cell, "model_sha256": "b33d8f01d98a" + "0" * 52}
    text = fig.render_paired_effects({"l": lessons, "r": reflections, "o": off_cell, "b": rebuilt})
    assert "| SEED, plan-reading SFT, lessons at other cells too | privileged lesson | 4 |" in text
    assert "| SEED, plan-reading SFT, lessons at other cells too, start b33d8f01d98a | privileged lesson | 4 |" in text
    assert "| SEED, lesson/reflection SFT | privileged lesson | 4 | 1.00 | 0.62 | +0.38 (0.12) | 3 / 0 |" in text
    assert (
        "| SEED, lesson/reflection SFT | privileged lesson, about a failed episode | 3 | 1.00 | 0.50 | +0.50 (0.00) | 3 / 0 | n/a |"
        in text
    )
    assert "| SEED, lesson/reflection SFT | privileged lesson, about a solved one | 1 | 1.00 | 1.00 | +0.00 |" in text
    assert "| ERL, plan-reading SFT | privileged reflection | 2 | 0.50 | 0.25 | +0.25 (0.75) | 1 / 1 |" in text
    assert "`python tools/mechanism_probe.py --lessons` (at abcdef0" in text and "--reflections` (at" in text


def test_the_readme_seed_summary_has_a_sokoban_line_as_far_as_its_probes_and_comparison_have_run(fig):
    probes = {name: json.loads(path.read_text()) for name, path in fig.MECHANISM_PROBES.items()}
    oracle = {"value": {"seed": {"probe_tasks": 64.0, "lesson_conditioned_success": 0.66, "lesson_free_success": 0.64},
                        "erl": {"second_success": 0.15, "first_success_same_tasks": 0.13}}, "command": "probe O"}  # fmt: skip
    assert "On Sokoban" not in fig.render_seed_methods(probes, None, None)
    line = entry(
        fig.render_seed_methods(probes, None, None, sokoban={"privileged (oracle) text": oracle}), "On Sokoban"
    )
    assert "privileged lessons gave 66% against 64% lesson-free" in line
    assert "second attempts succeed 15% against 13%" in line and "own lessons" not in line and "After RL" not in line
    own = {"value": {"writing": {"lesson_parse_rate": 0.75, "lesson_unparsed_cut": 0.25, "reflection_tagged_rate": 1.0},
                     "seed": {"lesson_conditioned_success": 0.5, "lesson_free_success": 0.6},
                     "erl": {"second_success": 0.1, "first_success_same_tasks": 0.2}}, "command": "probe S"}  # fmt: skip

    def stage(method, label, per_seed, against=None):
        mean = sum(per_seed.values()) / len(per_seed)
        h = {"per_seed": per_seed, "mean": mean, **({"against_grpo": against} if against else {})}
        return {"method": method, "label": label, "heldout": {"t0.4": h}}

    comparison = {
        "stages": [
            stage("grpo", "SFT+GRPO", {"1": 0.78, "2": 0.70}),
            stage(
                "seed-oracle",
                "SFT+SEED (oracle lessons)",
                {"1": 0.80},
                {"rl_seeds": 1, "wins": 5, "losses": 3, "p": 0.727},
            ),
            stage("erl", "SFT+ERL", {"1": 0.70, "2": 0.72}, {"rl_seeds": 2, "wins": 4, "losses": 10, "p": 0.18}),
        ],
        "command": "python tools/cpu_table.py --env sokoban C",
    }
    text = fig.render_seed_methods(
        probes, None, None, sokoban={"privileged (oracle) text": oracle, "the model's own text": own},
        sokoban_comparison=comparison,
    )  # fmt: skip
    line = entry(text, "On Sokoban")
    assert "own text: lessons parse 75% of the time at the writing check (25% of the episodes get one cut" in line
    assert "its own lessons give 50% against 60%, its own reflections 10% against 20%." in line
    # each method against GRPO of its own RL seeds
    # with the verdict the FrozenLake lines give: one RL seed compares two checkpoints, not the methods
    assert (
        "SEED (oracle lessons), 1 seed: held-out 0.80 at T=0.4 against GRPO's 0.78 from the same start (tasks +5/-3, sign test p=0.73): one RL seed: two "
        "checkpoints compared, not yet the methods" in line
    )
    assert (
        "ERL (own reflections), 2 seeds: held-out 0.71 at T=0.4 against GRPO's 0.74 from the same start (tasks +4/-10, sign test p=0.18): no difference beyond the seed spread"
        in line
    )
    assert "`probe S`" in text and "`python tools/cpu_table.py --env sokoban C`" in text
    assert "paired by task" not in line
    assert "during RL" not in line  # no mechanism metrics in these stages
    # with them: each seed's mean over iterations / last iteration, after the method's held-out line
    comparison["stages"][2]["mechanism"] = {
        "erl/reflection_tagged_rate": {"mean": [1.0, 0.95], "last": [1.0, 0.9]},
        "erl/second_minus_first_same_tasks": {"mean": [0.1, -0.05], "last": [0.2, 0.0]},
    }
    text = fig.render_seed_methods(probes, None, None, sokoban={"privileged (oracle) text": oracle},
                                   sokoban_comparison=comparison)  # fmt: skip
    assert (
        "beyond the seed spread. - ERL (own reflections) during RL (per seed, mean over iterations / last): own reflections "
        "in their tags 1.00 / 1.00, 0.95 / 0.90; second- minus first-attempt success on the same tasks 0.10 / 0.20, "
        "-0.05 / 0.00." in entry(text, "On Sokoban")
    )
    # SAPO's read-out ceiling, where its probe has run
    readout = {"value": {"readout": {"episodes": 128, "probe_corr": 0.234}}, "command": "probe R"}
    text = fig.render_seed_methods(probes, None, None, sokoban={"privileged (oracle) text": oracle},
                                   sokoban_readout=readout)  # fmt: skip
    assert "SAPO before RL: the best linear read-out of the SFT model's state-end hidden state" in entry(
        text, "On Sokoban"
    )
    assert "cross-validated over 128 episodes: 0.23." in entry(text, "On Sokoban") and "`probe R`" in text
    assert "SAPO before RL" not in entry(
        fig.render_seed_methods(probes, None, None, sokoban={"privileged (oracle) text": oracle}), "On Sokoban"
    )
    # SAPO's time per iteration against PPO, where its timing has run
    timing = {"results": {"ppo": {"iteration_s": 200.0}, "sapo": {"iteration_s": 150.0}}, "command": "timing T"}
    text = fig.render_seed_methods(probes, None, None, sokoban={"privileged (oracle) text": oracle},
                                   sokoban_sapo_time=timing)  # fmt: skip
    assert "SAPO: time per iteration against PPO at the same batch: x0.75." in entry(text, "On Sokoban")
    assert "`timing T`" in text and "against PPO" not in entry(text, "SAPO on FrozenLake")
    # the lesson effect over more tasks, paired by task, where its record exists
    pairs = [{"conditioned": 0.0, "free": 0.5, "lesson_from_success": 1.0}] * 3 + [
        {"conditioned": 1.0, "free": 0.5, "lesson_from_success": 0.0}
    ]
    effect = {"value": {"lessons": {"analyser": "oracle", "tasks": 4, "group_size": 4, "pairs": pairs}},
              "command": "probe L"}  # fmt: skip
    line = fig.render_seed_methods(
        probes, None, None, sokoban={"privileged (oracle) text": oracle}, sokoban_effects={"seed-oracle": effect}
    )
    line = entry(line, "On Sokoban")
    assert "lesson-free on the same tasks (over 4 tasks, paired by task, the gain is -0.25 (SE 0.25, p=0.32), " in line
    assert "+0.50 (p=n/a) where the lesson is about a failed episode); with the privileged" in line


def test_a_record_from_an_earlier_privileged_text_says_so_and_the_writing_block_has_a_column_per_text(fig):
    from agentgym.agents.oracle import TEXT_VERSIONS

    now = TEXT_VERSIONS["sokoban"]
    assert now > 1  # Sokoban's text changed once: records from before it are flagged
    old = {"env": "agentgym/Sokoban-v0"}  # written before the field: the first text
    assert f"text version 1 (the SFT start was taught it); the recipe now uses version {now}" in fig.oracle_text_note(
        old
    )
    assert "no longer lists the moves played" in fig.oracle_text_note(old)
    assert fig.oracle_text_note({"env": "agentgym/Sokoban-v0", "oracle_text": now}) == ""
    assert fig.oracle_text_note({"env": "agentgym/Sokoban-v0", "oracle_text": None}) == ""  # action-only start
    assert fig.oracle_text_note({"suite": "frozenlake-notslippery"}) == ""  # FrozenLake's text never changed
    assert fig.oracle_text_note({"suite": "alfworld"}) == ""  # no privileged analyser there

    def check(version, parse, cut):
        writing = {"lesson_parse_rate": parse, "lesson_unparsed_cut": cut, "lesson_oracle_match": 0.5,
                   "reflection_tagged_rate": 1.0, "lesson_episodes": 32.0, "reflection_episodes": 16.0}  # fmt: skip
        versions = {"git_commit": "abcdef0", "python": "3.11", "torch": "2", "transformers": "5"}
        return {"value": {"writing": writing}, "oracle_text": version, "versions": versions, "date": "d",
                "machine": "m", "wall_s": 60.0, "command": f"probe v{version}"}  # fmt: skip

    first = check(1, 0.75, 0.25)
    del first["oracle_text"]
    text = fig.render_writing_checks([first, check(now, 1.0, 0.0)])
    assert f"| | text v1 | text v{now} |" in text
    assert "| lessons that parse | 75% | 100% |" in text
    assert "| lessons that do not parse: cut at the token budget | 25% | 0% |" in text
    assert "| lessons that do not parse: about a solved episode | n/a | n/a |" in text
    assert "`probe v1`" in text and f"`probe v{now}`" in text
