"""tools/demo.py --table: the held-out table of baselines/README.md is computed from the submissions' episodes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import demo  # noqa: E402

from agentgym.agent_io import seed_specs  # noqa: E402
from agentgym.agents import ExpertAgent, RandomAgent  # noqa: E402
from agentgym.evaluation import run_episodes  # noqa: E402


def play(folder: Path, agent, n: int = 6) -> dict:
    (folder / "episodes").mkdir(parents=True)
    log = folder / "episodes" / "FrozenLakeNotSlippery-v0.jsonl"
    return run_episodes(demo.ENV, agent, seed_specs(n, seed=100000), log_path=log, progress=False).summary()


def test_table_averages_a_stage_over_its_seed_folders_and_draws_the_curves(tmp_path):
    expert = play(tmp_path / "expert", ExpertAgent())
    r1, r2 = play(tmp_path / "random_s1", RandomAgent(seed=1)), play(tmp_path / "random_s2", RandomAgent(seed=2))
    run = tmp_path / "grpo_run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"iteration": i, "charts/success_rate": 0.1 * i}) + "\n" for i in (1, 2))
    )
    png = tmp_path / "curve.png"
    table = demo.heldout_table([str(tmp_path / d) for d in ("expert", "random_s1", "random_s2")], [str(run)], png)
    by = {t["stage"]: t for t in table}
    assert list(by) == ["expert", "random"]
    assert by["expert"]["success_rate"] == expert["success_rate"] == 1.0 and by["expert"]["spread"] == 0
    assert by["random"]["seeds"] == 2 and by["random"]["episodes"] == 6
    assert by["random"]["success_rate"] == pytest.approx((r1["success_rate"] + r2["success_rate"]) / 2)
    assert by["random"]["spread"] == pytest.approx(abs(r1["success_rate"] - r2["success_rate"]) / 2)
    assert png.stat().st_size > 10_000


def test_the_curves_draw_one_line_per_method_the_mean_over_its_seeds(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(demo, "_save", lambda fig, path: drawn.append(fig) or path)

    def hist(*succ):
        return [{"iteration": i + 1, "charts/success_rate": v} for i, v in enumerate(succ)]

    row = {"success_rate": 0.5, "invalid_rate": 0.0, "episodes": 100}
    curves = {"grpo_s1": hist(0.2, 0.4), "grpo_s2": hist(0.4, 0.6), "sapo_s1": hist(0.5, 0.5)}
    demo.plot_stages([("sft", row), ("sft-grpo", row)], curves, tmp_path / "c.png")
    lines = drawn[0].axes[1].get_lines()
    assert [ln.get_label() for ln in lines] == ["grpo (2 seeds)", "sapo"]
    assert list(lines[0].get_ydata()) == pytest.approx([0.3, 0.5]) and list(lines[1].get_ydata()) == [0.5, 0.5]


def test_cpu_table_reads_episodes_and_iteration_time_from_the_runs_and_names_entries(tmp_path):
    import cpu_table

    grpo = cpu_table.config("frozenlake", "grpo")
    per_iter = grpo["num_tasks"] * grpo["group_size"]
    for seed, secs in ((1, (10.0, 20.0)), (2, (30.0, 40.0))):
        run = tmp_path / f"{grpo['exp_name']}_s{seed}"
        run.mkdir()
        rows = [{"iteration": i + 1, "time/iteration_s": s, "charts/success_rate": 0.5} for i, s in enumerate(secs)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    facts = cpu_table.stage_facts(tmp_path, "frozenlake", "grpo", [1, 2, 3])  # seed 3 has not run
    assert facts == {"episodes_trained": 2 * per_iter, "s_per_iteration": 25.0}
    # a method that counts its own episodes (ERL's second attempts) is taken at its word
    erl = cpu_table.config("frozenlake", "erl")
    run = tmp_path / f"{erl['exp_name']}_s1"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"time/iteration_s": 5.0, "charts/env_episodes": 31.0}) + "\n")
    assert cpu_table.stage_facts(tmp_path, "frozenlake", "erl", [1])["episodes_trained"] == 31.0
    names = {n: cpu_table.entry_meta(n) for n in ("smollm2-base", "smollm2-sft", "smollm2-sft-gigpo_s3")}
    assert names["smollm2-sft-gigpo_s3"] == {
        "name": "SmolLM2-135M SFT+GiGPO seed 3 (CPU table)",
        "method": "SFT+GiGPO",
        "method_type": "RL+SFT",
    }
    assert len({m["name"] for m in names.values()}) == 3
    # a longer SFT stage (--sft-epochs) gets its own entries beside the one-epoch ones
    assert (
        cpu_table.entry_meta("smollm2-sft-gigpo_s3", 3)["name"]
        == "SmolLM2-135M SFT (3 epochs)+GiGPO seed 3 (CPU table)"
    )
    assert cpu_table.entry_meta("smollm2-sft", 3)["method"] == names["smollm2-sft"]["method"] == "SFT"


def test_cpu_table_trains_sft_for_the_asked_epochs_and_rl_from_that_run(tmp_path, monkeypatch):
    import cpu_table

    cmds = []
    monkeypatch.setattr(cpu_table, "run", lambda cmd, log, threads: cmds.append(cmd) or 0.0)
    cpu_table.train("sokoban", "sft", None, tmp_path, 1, sft_epochs=3)
    cpu_table.train("sokoban", "gigpo", 2, tmp_path, 1)
    sft, rl = cmds
    assert sft[sft.index("--total-iterations") + 1] == "3" and sft[sft.index("--output-dir") + 1] == str(tmp_path)
    assert rl[rl.index("--init-from") + 1] == str(tmp_path / "sft_smollm2_sokoban") and "--total-iterations" not in rl
    # a killed run resumes from its last iteration, a killed SFT from its last epoch
    assert rl[rl.index("--save-every") + 1] == "1" and sft[sft.index("--save-every") + 1] == "1"
    cpu_table.train("sokoban", "sft", None, tmp_path, 1)  # the config's epochs
    assert "--total-iterations" not in cmds[-1]


def test_cpu_table_keeps_only_the_last_checkpoint_of_a_finished_run(tmp_path):
    import cpu_table

    run = tmp_path / "grpo_smollm2_frozenlake_s1"
    for i in (5, 6):
        (run / f"ckpt_{i:06d}").mkdir(parents=True)
        (run / f"ckpt_{i:06d}" / "state.pt").write_bytes(b"x")
    cpu_table.prune_checkpoints(run)  # not finished (no exported model): both stay, the run may resume
    assert sorted(p.name for p in run.glob("ckpt_*")) == ["ckpt_000005", "ckpt_000006"]
    (run / "model").mkdir()
    (run / "model" / "config.json").write_text("{}")
    cpu_table.prune_checkpoints(run)
    assert sorted(p.name for p in run.glob("ckpt_*")) == ["ckpt_000006"]


def test_cpu_table_runs_the_seed_mechanism_comparison_from_one_lesson_reflection_sft(tmp_path, monkeypatch):
    """``--sft mech``: the lesson/reflection SFT config, every RL run (oracle variants included) from that one
    checkpoint, the oracle variants through their own configs and the ERL/SEED scripts; mechanism metrics read back."""
    import cpu_table

    cmds = []
    monkeypatch.setattr(cpu_table, "run", lambda cmd, log, threads: cmds.append(cmd) or 0.0)
    cpu_table.train("frozenlake", "sft", None, tmp_path, 1, sft="mech")
    for method in ("erl-oracle", "seed-oracle", "erl", "grpo"):
        cpu_table.train("frozenlake", method, 1, tmp_path, 1, sft="mech")
    sft, erl_oracle, seed_oracle, erl, grpo = cmds
    assert sft[sft.index("--config") + 1].endswith("configs/cpu/sft_smollm2_frozenlake_mech.yaml")
    assert sft[sft.index("--exp-name") + 1] == "sft_smollm2_frozenlake_mech"
    for cmd in (erl_oracle, seed_oracle, erl, grpo):  # paired: one fixed SFT checkpoint
        assert cmd[cmd.index("--init-from") + 1] == str(tmp_path / "sft_smollm2_frozenlake_mech")
    assert erl_oracle[1] == "baselines/erl.py" and erl_oracle[3].endswith("erl_oracle_smollm2_frozenlake.yaml")
    assert seed_oracle[1] == "baselines/seed.py" and seed_oracle[3].endswith("seed_oracle_smollm2_frozenlake.yaml")
    assert erl[3].endswith("/erl_smollm2_frozenlake.yaml")
    assert cpu_table.config("frozenlake", "erl-oracle")["reflector"] == "oracle"
    assert cpu_table.config("frozenlake", "seed-oracle")["analyser_model"] == "oracle"
    # a killed run resumes
    run = tmp_path / "erl_oracle_smollm2_frozenlake_s1"
    run.mkdir()
    (run / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"iteration": i, "erl/second_success_rate": v, "erl/first_success_same_tasks": 0.25}) + "\n"
            for i, v in ((1, 0.5), (2, 1.0))
        )
        # an iteration without a failed first attempt, as logs before the fix wrote it: rates of 0, not counted
        + json.dumps({"iteration": 3, "erl/num_reflections": 0.0, "erl/second_success_rate": 0.0})
        + "\n"
    )
    cpu_table.train("frozenlake", "erl-oracle", 1, tmp_path, 1, sft="mech")
    assert cmds[-1][-1] == "--resume"
    facts = cpu_table.mechanism_facts(tmp_path, "frozenlake", "erl-oracle", [1, 2])
    assert facts["erl/second_success_rate"] == {"seeds": [1.0], "mean": [0.75], "last": [1.0]}
    assert facts["erl/first_success_same_tasks"]["last"] == [0.25]
    meta = cpu_table.entry_meta("smollm2-sft-erl-oracle_s1", None, "mech")
    assert meta["name"] == "SmolLM2-135M SFT with lessons and reflections+ERL (oracle reflections) seed 1 (CPU table)"
    # --sft mech_plans: the same RL configs from the other lesson/reflection SFT checkpoint
    cpu_table.train("frozenlake", "sft", None, tmp_path / "plans", 1, sft="mech_plans")
    cpu_table.train("frozenlake", "erl-oracle", 1, tmp_path / "plans", 1, sft="mech_plans")
    sft, erl_oracle = cmds[-2:]
    assert sft[sft.index("--config") + 1].endswith("configs/cpu/sft_smollm2_frozenlake_mech_plans.yaml")
    assert erl_oracle[erl_oracle.index("--init-from") + 1] == str(
        tmp_path / "plans" / "sft_smollm2_frozenlake_mech_plans"
    )
    assert cpu_table.entry_meta("smollm2-sft", None, "mech_plans")["name"] == (
        "SmolLM2-135M SFT with lessons, reflections and plan-reading rows (CPU table)"
    )
    # --sft mech_lessons: that recipe with lesson rows off their cell too
    cpu_table.train("frozenlake", "sft", None, tmp_path / "lessons", 1, sft="mech_lessons")
    sft = cmds[-1]
    assert sft[sft.index("--config") + 1].endswith("configs/cpu/sft_smollm2_frozenlake_mech_lessons.yaml")
    assert cpu_table.config("frozenlake", "sft", "mech_lessons")["lesson_off_cell_rows"] == 256


def _tiny_sft(tmp_path, **extra) -> dict:
    """A tiny SFT run on FrozenLake in the CPU configs' prompt settings (``tmp_path / "sft"``); its last metrics."""
    from baselines import sft

    return sft.train(
        sft.Args(
            model="tiny",
            env_id="agentgym/FrozenLakeNotSlippery-v0",
            output_dir=str(tmp_path),
            exp_name="sft",
            expert_episodes=4,
            total_iterations=1,
            history_length=0,
            prompt_style="erl-cells",
            progress=False,
            plot=False,
            **extra,
        )
    )


def test_mechanism_probe_measures_writing_erl_and_seed_on_a_trained_run(tmp_path):
    """tools/mechanism_probe.py on a tiny SFT run: the model's own writing, oracle ERL's paired second-vs-first
    attempt success and oracle SEED's lesson-conditioned vs lesson-free success, all on the same held-out tasks."""
    import mechanism_probe

    _tiny_sft(tmp_path)
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "group_size": 2, "dtype": "float32"}
    out = mechanism_probe.probe("frozenlake", str(tmp_path / "sft"), episodes=3, tasks=2, own=False, overrides=tiny)
    assert out["writing"]["lesson_episodes"] == 3.0 and 0.0 <= out["writing"]["lesson_parse_rate"] <= 1.0
    erl = out["erl"]
    assert erl["reflector"] == "oracle" and 0.0 <= erl["first_success"] <= 1.0
    if erl["failed_first_attempts"]:
        assert 0.0 <= erl["second_success"] <= 1.0 and erl["reflections"][0].startswith("Last time:")
    assert out["seed"]["analyser"] == "oracle" and out["seed"]["lesson_parse_rate"] == 1.0
    assert out["seed"]["probe_tasks"] == 2.0


def test_mechanism_probe_writing_alone_says_why_the_unparsed_lessons_failed(tmp_path):
    """``--writing``: the model's own lessons and reflections on held-out episodes, with the unparsed lessons split
    by cause (cut at the token budget; about a solved episode)."""
    import mechanism_probe

    from agentgym.agents.oracle import TEXT_VERSIONS
    from baselines.sft import oracle_text_of

    _tiny_sft(tmp_path, lesson_rows=2, analysis_episodes=8)
    assert oracle_text_of(tmp_path / "sft") == TEXT_VERSIONS["frozenlake"]  # what the records say it learned
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "dtype": "float32"}
    out = mechanism_probe.writing("frozenlake", str(tmp_path / "sft"), episodes=3, overrides=tiny)
    assert out["lesson_episodes"] == 3.0 and out["lesson_parse_rate"] == 0.0  # a random tiny model writes no JSON
    assert out["lesson_unparsed_cut"] == 1.0  # ... and runs into the 160-token budget on every episode
    assert 0.0 <= out["lesson_unparsed_solved"] <= 1.0
    # a finished run whose checkpoints were pruned is probed from its exported model, with the same weights

    for ckpt in (tmp_path / "sft").glob("ckpt_*"):
        shutil.rmtree(ckpt)
    del tiny["model"]
    assert mechanism_probe.writing("frozenlake", str(tmp_path / "sft"), episodes=3, overrides=tiny) == out


def test_a_mechanism_probe_record_names_the_weights_it_probed(tmp_path, monkeypatch):
    """Two builds of one SFT recipe can differ (another CPU), so a probe record carries the SHA-256 of the checkpoint's
    weights, the identity the comparison archives give their start; a run folder without weights fails at once."""
    import cpu_table
    import mechanism_probe

    _tiny_sft(tmp_path)
    # the measurement itself is tested above (and needs the CPU config's model): here, what the record says of it
    monkeypatch.setattr(mechanism_probe, "context_reliance", lambda *a, **k: {"lesson": {"rows": 0}})
    out = tmp_path / "probe.json"
    argv = ["--env", "frozenlake", "--model", str(tmp_path / "sft"), "--context-rows", "--out", str(out)]
    assert mechanism_probe.main(argv) == 0
    rec = json.loads(out.read_text())
    assert rec["value"] == {"context_rows": {"lesson": {"rows": 0}}}
    assert rec["model_sha256"] == cpu_table.weights_sha256(tmp_path / "sft" / "model")
    assert rec["versions"]["torch"] and rec["command"].endswith(f"--out {out}")
    (tmp_path / "bare" / "model").mkdir(parents=True)
    with pytest.raises(SystemExit, match="no \\*.safetensors weights"):
        mechanism_probe.main(["--model", str(tmp_path / "bare"), "--context-rows", "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


def test_mechanism_probe_lessons_pairs_each_task_conditioned_against_its_lesson_free_rollouts(tmp_path):
    """``--lessons``: one SEED collection with oracle lessons, one lesson-conditioned episode per task with a
    lesson, paired with that task's lesson-free mean; split by the lesson's source episode."""
    import mechanism_probe

    _tiny_sft(tmp_path)
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "group_size": 2, "dtype": "float32"}
    out = mechanism_probe.lesson_effect("frozenlake", str(tmp_path / "sft"), tasks=3, own=False, overrides=tiny)
    assert out["analyser"] == "oracle" and out["group_size"] == 2
    assert len(out["pairs"]) == out["all"]["tasks"] == 3  # the oracle writes a lesson on every episode
    assert out["lesson_from_failure"]["tasks"] + out["lesson_from_success"]["tasks"] == 3
    for p in out["pairs"]:
        assert p["conditioned"] in (0.0, 1.0) and p["free"] in (0.0, 0.5, 1.0)


def test_mechanism_probe_reflections_pairs_each_second_attempt_with_its_tasks_other_first_attempts(tmp_path):
    import mechanism_probe

    _tiny_sft(tmp_path)
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "group_size": 2, "dtype": "float32"}
    out = mechanism_probe.reflection_effect("frozenlake", str(tmp_path / "sft"), tasks=3, own=False, overrides=tiny)
    assert out["tasks"] == 3 and out["reflector"] == "oracle"
    n = out["failed_first_attempts"]
    if n:  # a tiny random model fails most first attempts
        assert out["paired"]["tasks"] == n and out["paired"]["conditioned"] == out["second_success"]
        assert abs(out["paired"]["free"] - out["first_success_same_tasks"]) < 1e-12
        assert out["second_solved"] + out["second_same_mistake"] + out["second_other_mistake"] == n


def test_paired_gain_tests_the_mean_difference_not_the_signs():
    import math
    import statistics

    import mechanism_probe

    pairs = [{"conditioned": c, "free": f} for c, f in [(1, 0.5), (1, 0.25), (0, 0.5), (1, 1), (1, 0)]]
    g = mechanism_probe.paired_gain(pairs)
    diffs = [0.5, 0.75, -0.5, 0.0, 1.0]
    assert g["tasks"] == 5 and (g["up"], g["down"]) == (3, 1)
    se = statistics.stdev(diffs) / math.sqrt(5)
    assert g["gain"] == pytest.approx(statistics.mean(diffs)) and g["se"] == pytest.approx(se)
    assert g["p"] == pytest.approx(math.erfc(statistics.mean(diffs) / se / math.sqrt(2)))
    assert g["conditioned"] == 0.8 and g["free"] == pytest.approx(0.45)
    # no effect on tasks solved 3 times in 4: most pairs are +0.25, a few -0.75, and the mean is zero -- no gain
    null = [{"conditioned": 1.0, "free": 0.75}] * 75 + [{"conditioned": 0.0, "free": 0.75}] * 25
    g = mechanism_probe.paired_gain(null)
    assert (g["up"], g["down"]) == (75, 25) and g["gain"] == pytest.approx(0.0) and g["p"] == pytest.approx(1.0)
    assert mechanism_probe.paired_gain([])["gain"] is None


def test_mechanism_probe_replays_the_sft_context_rows_with_and_without_their_text(tmp_path):
    """``--context-rows``: the SFT run's text-in-context rows rebuilt from its folder (as many as it trained on,
    reflections and lessons alternating by failed episode), each played greedily with and without its text."""
    import mechanism_probe

    stats = _tiny_sft(tmp_path, context_rows=6, analysis_episodes=24, perturb_prob=0.7)
    assert stats["sft/context_rows"] == 6.0
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "dtype": "float32"}
    out = mechanism_probe.context_reliance("frozenlake", str(tmp_path / "sft"), overrides=tiny)
    assert sum(v["rows"] for v in out.values()) == 6 and "reflection" in out
    for v in out.values():
        assert all(
            0.0 <= v[k] <= 1.0 for k in ("target_with_text", "target_without_text", "same_move_with_and_without")
        )
        assert v["rows_not_expert"] == 0  # this recipe's targets are the env expert's moves


def test_mechanism_probe_plays_a_lesson_at_the_cells_it_does_not_name(tmp_path):
    """``--context-rows --lesson-off-cell-rows N`` on a plan-reading run: besides its own rows, N rows with a lesson
    at its plan's other cells, and how often the model plays the lesson's move there (with the lesson, without)."""
    import mechanism_probe

    from agentgym.agents import NoisyExpertAgent
    from agentgym.agents.oracle import critique, oracle_lesson
    from agentgym.episodes import read_episodes

    own = tmp_path / "own.jsonl"
    run_episodes("agentgym/FrozenLakeNotSlippery-v0", NoisyExpertAgent(0.6, seed=3), seed_specs(40), log_path=own)
    failed = [ep for ep in read_episodes(own) if not ep.success]
    for ep in failed:  # the probe reads the move back from the privileged lesson's text
        c = critique(ep)
        assert mechanism_probe._lesson_move(oracle_lesson(ep, c)["episode_skill"]) == (c.better if c.where else None)
    stats = _tiny_sft(tmp_path, context_rows=12, context_plans="varied", context_episodes=[str(own)])
    assert stats["sft/context_rows"] == 12.0 and stats["sft/lesson_off_cell_rows"] == 0.0
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "dtype": "float32"}
    out = mechanism_probe.context_reliance("frozenlake", str(tmp_path / "sft"), overrides=tiny, lesson_off_cell_rows=3)
    assert sum(v["rows"] for k, v in out.items() if k != "lesson_off_cell") == 12
    v = out["lesson_off_cell"]
    assert v["rows"] == 3 and 0 < v["rows_lesson_move_wrong"] <= 3
    assert all(0.0 <= v[f"lesson_move_{w}_text"] <= 1.0 for w in ("with", "without"))


def test_mechanism_probe_readout_ceiling_fits_sapos_function_class_on_the_policys_own_episodes(tmp_path):
    """``--readout``: the SFT policy's episodes as SAPO's first iteration plays them; SAPO's raw read-out equals the
    state-end hidden state times (w+ - w-), so the ridge probe on that hidden state is the read-out's best fit."""
    import mechanism_probe
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 8))
    groups = [i // 4 for i in range(400)]  # 100 "episodes" of 4 turns
    y = X @ rng.normal(size=8) + 0.1 * rng.normal(size=400)
    pred = mechanism_probe.cross_validated_ridge(X, y, groups, 5, 1.0, seed=0)
    assert np.corrcoef(pred, y)[0, 1] > 0.99  # a linear target is found out of fold
    noise = rng.normal(size=400)
    assert abs(np.corrcoef(mechanism_probe.cross_validated_ridge(X, noise, groups, 5, 1.0, seed=0), noise)[0, 1]) < 0.2

    _tiny_sft(tmp_path)
    tiny = {"model": "tiny", "max_new_tokens": 4, "max_prompt_tokens": 512, "dtype": "float32"}
    out = mechanism_probe.readout_ceiling("frozenlake", str(tmp_path / "sft"), tasks=6, folds=3, overrides=tiny)
    assert out["episodes"] == 6 and out["turns"] >= 6
    assert out["readout_minus_hidden_max"] < 1e-4
    assert set(out["ridge"]) == {"1", "10", "100", "1000", "10000", "100000", "1e+06"} and out["probe_corr"] == max(
        f["corr"] for f in out["ridge"].values()
    )


def test_mechanism_probe_compares_the_second_attempts_first_move_with_the_tasks_first_attempts(monkeypatch):
    """Where a failed first attempt's first move was the mistake, the probe reports how often the second attempt
    took the better move against how often the task's first attempts did (only first-step mistakes count)."""
    from types import SimpleNamespace

    import mechanism_probe

    from agentgym.agents import oracle

    def episode(*moves):
        return SimpleNamespace(steps=[SimpleNamespace(action=m) for m in moves], moves=list(moves))

    crit = {"up": oracle.Critique("frozenlake", False, ["up"], 1, "hole", better="left")}
    crit["down"] = oracle.Critique("frozenlake", False, ["down", "down"], 2, "hole", better="right")
    monkeypatch.setattr(oracle, "critique", lambda ep: crit[ep.moves[0]])
    # 2 tasks x G=3; the failed attempts 0 and 3 are left out of their own task's rates
    firsts = [episode("up"), episode("left"), episode("up"), episode("down", "down"), episode("right"), episode("up")]
    out = mechanism_probe.first_move_fixes(firsts, [0, 3], [episode("left"), episode("down")], 3)
    assert out == {
        "first_step_mistakes": 1,
        "better_first_move_rate_first_attempts": 0.5,
        "better_first_move_rate_second_attempts": 1.0,
        "mistaken_first_move_rate_first_attempts": 0.5,
        "mistaken_first_move_rate_second_attempts": 0.0,
    }


def test_the_demo_reports_its_disk_use_and_drops_the_resume_state(tmp_path):
    run = tmp_path / "demo_sft"
    (run / "ckpt_000001").mkdir(parents=True)
    (run / "ckpt_000001" / "state.pt").write_bytes(b"x" * 3_000_000)
    (run / "model").mkdir()
    (run / "model" / "model.safetensors").write_bytes(b"x" * 1_000_000)
    kept = demo.run_space([run], keep_checkpoints=True)
    assert (run / "ckpt_000001").exists() and "removed" not in kept and "disk used by the demo" in kept
    report = demo.run_space([run], keep_checkpoints=False)
    assert not (run / "ckpt_000001").exists() and (run / "model" / "model.safetensors").exists()
    assert f"{run}: 0.00 GB, removed 1 checkpoint(s) of 0.00 GB" in report
    assert demo.folder_bytes(run) == 1_000_000


def test_demo_prints_intervals_labels_its_smoke_run_and_shows_the_recorded_result(tmp_path):
    """The main job's RL stage is too small to show an effect: it says so, prints each rate's 95% interval and
    the recorded full-size result of the same path beside it, and draws both (no single-point curve)."""
    row = {"episodes": 20, "success_rate": 0.2, "invalid_rate": 0.0}
    stages = [("as shipped", {**row, "success_rate": 0.0, "invalid_rate": 0.99}), ("SFT", row), ("SFT+GiGPO", row)]
    recorded = demo.recorded_stages("gigpo")
    assert [name for name, _ in recorded] == ["as shipped", "SFT", "SFT+GiGPO"]
    assert len(recorded[2][1]) == 3  # the three GiGPO seeds of the CPU table
    rl_cfg = demo._config(demo.RL_CONFIG)
    lines = demo.compare_lines(stages, recorded, rl_cfg, "GiGPO")
    text = "\n".join(lines)
    assert "demo, SFT: 0.20 [0.08, 0.42] on 20 seeds" in text  # Wilson 95% for 4 of 20
    assert "smoke run" in text and "recorded at full size" in text
    assert "SFT+GiGPO: 0.69 (0.66-0.71, 3 seeds)" in text
    png = demo.plot_demo(stages, recorded, tmp_path / "demo.png")
    assert png.stat().st_size > 20_000


def _fake_eval(sub, solved: dict[int, bool]) -> None:
    """An evaluation folder as ``agentgym eval --out`` leaves it: submission.json and an episode log."""
    from agentgym.episodes import Episode, JsonlWriter, Step

    sub.mkdir(parents=True)
    (sub / "submission.json").write_text("{}")
    with JsonlWriter(sub / "episodes" / "FrozenLakeNotSlippery-v0.jsonl", fsync=False) as w:
        for seed, ok in solved.items():
            step = Step("right", "", float(ok), True, False, {"success": ok})
            w.write(Episode("agentgym/FrozenLakeNotSlippery-v0", seed, "", steps=[step]))


def test_cpu_table_comparison_pairs_each_method_with_grpo_task_by_task_and_seed_by_seed(tmp_path):
    """The comparison record: per RL seed held-out success, mean and spread, and the exact sign test against GRPO
    on the tasks where exactly one of the two (same RL seed, same held-out seed) succeeded."""
    import cpu_table

    assert cpu_table.sign_test(0, 0) == 1.0
    assert cpu_table.sign_test(8, 0) == pytest.approx(2 / 2**8)  # 8 of 8 discordant tasks one way
    assert cpu_table.sign_test(3, 7) == cpu_table.sign_test(7, 3) == pytest.approx(2 * 176 / 1024)
    out, runs = tmp_path / "heldout", tmp_path / "runs"
    tasks = range(100000, 100010)
    _fake_eval(out / "t0.4" / "smollm2-sft", {t: t % 2 == 0 for t in tasks})
    for seed, grpo_ok, seed_ok in ((1, 5, 8), (2, 6, 7)):  # first k tasks solved
        _fake_eval(out / "t0.4" / f"smollm2-sft-grpo_s{seed}", {t: t - 100000 < grpo_ok for t in tasks})
        _fake_eval(out / "t0.4" / f"smollm2-sft-seed_s{seed}", {t: t - 100000 < seed_ok for t in tasks})
    _fake_eval(out / "t0.4" / "smollm2-sft-erl_s3", {t: True for t in tasks})  # no GRPO run of seed 3 to pair with
    rec = cpu_table.comparison("frozenlake", ["grpo", "seed", "erl"], [1, 2, 3], [0.4], runs, out, "mech")
    assert rec["sft"] == {"t0.4": 0.5}
    grpo, seed, erl = (s["heldout"]["t0.4"] for s in rec["stages"])
    assert grpo["per_seed"] == {"1": 0.5, "2": 0.6} and grpo["mean"] == pytest.approx(0.55)
    assert seed["spread"] == pytest.approx(0.05) and "against_grpo" not in grpo
    assert seed["against_grpo"] == {"rl_seeds": 2, "wins": 4, "losses": 0, "p": pytest.approx(2 / 16)}
    assert erl["against_grpo"] == {"rl_seeds": 0, "wins": 0, "losses": 0, "p": 1.0}
    assert [s["label"] for s in rec["stages"]] == ["SFT+GRPO", "SFT+SEED", "SFT+ERL"]
    assert rec["pending"] == ["grpo seed 3", "seed seed 3", "erl seed 1", "erl seed 2"]
    # a method none of whose runs is evaluated yet is pending, not a row; an oracle variant runs the first seed only
    rec = cpu_table.comparison("frozenlake", ["grpo", "erl-oracle"], [1, 2], [0.4], runs, out, "mech")
    assert [s["method"] for s in rec["stages"]] == ["grpo"] and rec["pending"] == ["erl-oracle seed 1"]
    # --oracle-seeds N: the oracle variant runs the first N seeds, where its own result is the claim
    rec = cpu_table.comparison("frozenlake", ["grpo", "erl-oracle"], [1, 2], [0.4], runs, out, "mech", oracle_seeds=2)
    assert rec["pending"] == ["erl-oracle seed 1", "erl-oracle seed 2"]


def test_cpu_table_pairs_a_variant_with_the_method_it_varies_too(tmp_path):
    """``sapo-readout`` (SAPO with its read-out rows at 100x the learning rate) is paired with GRPO like every method,
    and with SAPO of the same RL seed: that pairing is what says what the one setting it changes does."""
    import cpu_table

    out, runs = tmp_path / "heldout", tmp_path / "runs"
    tasks = range(100000, 100010)
    _fake_eval(out / "t0.4" / "smollm2-sft", {t: True for t in tasks})
    for seed in (1, 2):
        for method, k in (("grpo", 5), ("sapo", 8), ("sapo-readout", 6)):  # the first k tasks solved
            _fake_eval(out / "t0.4" / f"smollm2-sft-{method}_s{seed}", {t: t - 100000 < k for t in tasks})
    rec = cpu_table.comparison("sokoban", ["grpo", "sapo", "sapo-readout"], [1, 2], [0.4], runs, out, "mech")
    grpo, sapo, variant = (s["heldout"]["t0.4"] for s in rec["stages"])
    assert variant["against_grpo"] == {"rl_seeds": 2, "wins": 2, "losses": 0, "p": pytest.approx(0.5)}
    assert variant["against_base"] == {"method": "sapo", "rl_seeds": 2, "wins": 0, "losses": 4, "p": 0.125}
    assert "against_base" not in sapo and "against_base" not in grpo
    # without the method it varies in the table, a variant is paired with GRPO only
    rec = cpu_table.comparison("sokoban", ["grpo", "sapo-readout"], [1, 2], [0.4], runs, out, "mech")
    assert "against_base" not in rec["stages"][1]["heldout"]["t0.4"]


def test_cpu_table_says_how_long_a_run_played_grpos_episodes(tmp_path):
    """Same start, same sampling seeds: a method plays GRPO's episodes of the same RL seed until its weights differ.
    The record counts those leading iterations per seed, from both runs' logged rollout metrics."""
    import cpu_table

    runs = tmp_path / "runs"

    def log(name: str, rows: list[tuple[float, float]]) -> None:
        (runs / name).mkdir(parents=True)
        lines = [
            {"iteration": i + 1, "charts/success_rate": a, "rollout/response_length": b}
            for i, (a, b) in enumerate(rows)
        ]
        (runs / name / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))

    log("grpo_smollm2_sokoban_s1", [(0.8, 30.0), (0.9, 31.0), (0.7, 30.5)])
    log("seed_smollm2_sokoban_s1", [(0.8, 30.0), (0.9, 31.5), (0.7, 30.5)])  # same success, other tokens at 2
    log("grpo_smollm2_sokoban_s2", [(0.5, 30.0), (0.6, 31.0)])
    log("seed_smollm2_sokoban_s2", [(0.5, 30.0), (0.6, 31.0)])
    log("sapo_smollm2_sokoban_s1", [(0.6, 29.0), (0.9, 31.0), (0.7, 30.5)])
    assert cpu_table.same_rollouts(runs, "sokoban", "seed", [1, 2, 3]) == {"1": 1, "2": 2}  # no run of seed 3
    assert cpu_table.same_rollouts(runs, "sokoban", "sapo", [1]) == {"1": 0}


def test_cpu_table_sft_seeds_train_other_sft_seeds_and_report_the_sft_rows_spread(tmp_path, monkeypatch):
    """``--sft-seeds``: each other training seed of the SFT stage is trained (its seed, 2-row pieces of the same
    steps, no RL start) and evaluated beside the RL runs; the record reports the SFT row over the seeds, the fixed
    checkpoint's seed included, while every RL run still pairs with the fixed checkpoint."""
    import cpu_table

    out, runs = tmp_path / "heldout", tmp_path / "runs"
    cmds = []

    def fake_run(cmd, log, threads):
        cmds.append(cmd)
        if "baselines/sft.py" in cmd:
            run_dir = Path(cmd[cmd.index("--output-dir") + 1]) / cmd[cmd.index("--exp-name") + 1]
            (run_dir / "model").mkdir(parents=True)
            (run_dir / "model" / "config.json").write_text("{}")
            (run_dir / "metrics.jsonl").write_text('{"iteration": 1}\n')
        else:  # agentgym eval: the SFT seed 2 solves the first 7 of 10 tasks
            _fake_eval(ROOT / cmd[cmd.index("--out") + 1], {k: k - 100000 < 7 for k in range(100000, 100010)})
        return 0.0

    monkeypatch.setattr(cpu_table, "run", fake_run)
    assert cpu_table.sft_seed("frozenlake", "mech") == 1  # the config leaves the trainer's default seed
    cpu_table.train_and_evaluate("frozenlake", "sft", 2, runs, out, 1, [0.4], "mech", tmp_path / "archive")
    train_cmd = cmds[0]
    assert train_cmd[1] == "baselines/sft.py" and "--init-from" not in train_cmd
    assert train_cmd[train_cmd.index("--exp-name") + 1] == "sft_smollm2_frozenlake_mech_s2"
    assert (
        train_cmd[train_cmd.index("--seed") + 1] == "2" and train_cmd[train_cmd.index("--micro-batch-size") + 1] == "2"
    )
    assert (out / "t0.4" / "smollm2-sft_s2" / "submission.json").exists()
    assert (tmp_path / "archive" / "train" / "sft_smollm2_frozenlake_mech_s2" / "metrics.jsonl").exists()
    _fake_eval(out / "t0.4" / "smollm2-sft", {k: k % 2 == 0 for k in range(100000, 100010)})
    _fake_eval(out / "t0.4" / "smollm2-sft-grpo_s1", {k: True for k in range(100000, 100010)})
    rec = cpu_table.comparison("frozenlake", ["grpo"], [1], [0.4], runs, out, "mech", [2, 3])
    assert rec["sft"] == {"t0.4": 0.5}  # the fixed checkpoint: every RL run's start
    assert rec["sft_seed"] == 1 and rec["sft_seeds"]["t0.4"]["per_seed"] == {"1": 0.5, "2": 0.7}  # seed 3 not yet
    assert rec["sft_seeds"]["t0.4"]["mean"] == pytest.approx(0.6) and rec["sft_seeds"]["t0.4"][
        "spread"
    ] == pytest.approx(0.1)
    assert "sft_seeds" not in cpu_table.comparison("frozenlake", ["grpo"], [1], [0.4], runs, out, "mech")
    # the SFT seeds' own text, from their validation (the fixed checkpoint's run has none here: left out)
    (runs / "sft_smollm2_frozenlake_mech_s2" / "metrics.jsonl").write_text(
        '{"iteration": 0, "val/success_rate": 0.0}\n'
        '{"iteration": 1, "val/success_rate": 0.9, "val/lesson_parse_rate": 0.875, "val/reflection_tagged_rate": 0.25}\n'
    )
    (runs / "sft_smollm2_frozenlake_mech_s3").mkdir()  # seed 3 still training: its first validation is no result
    (runs / "sft_smollm2_frozenlake_mech_s3" / "metrics.jsonl").write_text(
        '{"iteration": 0, "val/success_rate": 0.0}\n'
    )
    rec = cpu_table.comparison("frozenlake", ["grpo"], [1], [0.4], runs, out, "mech", [2, 3])
    assert rec["sft_validation"] == {
        "2": {"success_rate": 0.9, "lesson_parse_rate": 0.875, "reflection_tagged_rate": 0.25}
    }
    # a machine that restored the archive has no run folder of the fixed checkpoint: the archive keeps its validation
    # (check_sft writes it there from the run, also into an archive from before the field)
    archive, start = tmp_path / "archive", runs / "sft_smollm2_frozenlake_mech"
    (start / "model").mkdir(parents=True)
    (start / "model" / "model.safetensors").write_bytes(b"weights")
    (start / "metrics.jsonl").write_text(
        '{"iteration": 2, "val/success_rate": 0.8125, "val/lesson_parse_rate": 1.0}\n'
    )
    (archive / "sft.json").write_text(
        json.dumps({"sha256": cpu_table.weights_sha256(start / "model"), "command": "c"})
    )
    cpu_table.check_sft(archive, start, "c")
    kept = {"success_rate": 0.8125, "lesson_parse_rate": 1.0}
    assert json.loads((archive / "sft.json").read_text())["validation"] == kept
    shutil.rmtree(start)
    rec = cpu_table.comparison("frozenlake", ["grpo"], [1], [0.4], runs, out, "mech", [2, 3], archive=archive)
    assert rec["sft_validation"]["1"] == kept and rec["sft_validation"]["2"]["success_rate"] == 0.9
    assert cpu_table.entry_meta("smollm2-sft_s2", sft_variant="mech")["name"] == (
        "SmolLM2-135M SFT with lessons and reflections training seed 2 (CPU table)"
    )
    assert cpu_table._interleave([("sft", 2), ("sft", 3)], ["a", "b", "c"]) == [("sft", 2), "a", ("sft", 3), "b", "c"]


def test_cpu_table_sigusr1_lets_the_runs_in_progress_finish_and_starts_no_other():
    """``kill -USR1``: before a machine goes away, no run is started that could not finish; the one in progress
    completes (its result is kept) and the drained ones are counted."""
    import os
    import signal
    import time

    import cpu_table

    done = []

    def job(name):
        if name == "first":
            os.kill(os.getpid(), signal.SIGUSR1)  # arrives while this run is in progress
            time.sleep(1.0)  # still in progress when the main thread handles it
        done.append(name)

    before = signal.getsignal(signal.SIGUSR1)
    assert cpu_table.run_jobs([(job, ("first",)), (job, ("second",)), (job, ("third",))], 1) == 2
    assert done == ["first"] and signal.getsignal(signal.SIGUSR1) == before
    assert cpu_table.run_jobs([(job, ("second",)), (job, ("third",))], 2) == 0 and sorted(done) == [
        "first",
        "second",
        "third",
    ]


def test_cpu_table_archive_lets_a_fresh_machine_continue_the_comparison(tmp_path, monkeypatch, capsys):
    """``--archive``: a finished run's evaluations and metrics.jsonl go into the repository; on a fresh machine they
    come back, the run is not trained again, the comparison reads the same numbers; an SFT start with other weights
    is refused (the runs would no longer be paired)."""
    import cpu_table

    out, runs, archive = tmp_path / "heldout", tmp_path / "runs", tmp_path / "archive"
    tasks = range(100000, 100010)
    for t in ("t0.4", "greedy"):
        _fake_eval(out / t / "smollm2-sft", {k: k % 2 == 0 for k in tasks})
        _fake_eval(out / t / "smollm2-sft-grpo_s1", {k: k % 3 == 0 for k in tasks})
    (runs / "grpo_smollm2_frozenlake_s1").mkdir(parents=True)
    (runs / "grpo_smollm2_frozenlake_s1" / "metrics.jsonl").write_text('{"iteration": 1, "time/iteration_s": 9}\n')
    cpu_table.archive_run(archive, out, [0.4, 0.0], "smollm2-sft", None)
    cpu_table.archive_run(archive, out, [0.4, 0.0], "smollm2-sft-grpo_s1", runs / "grpo_smollm2_frozenlake_s1")
    (archive / "heldout" / "t0.4" / "smollm2-sft-seed_s1.partial").mkdir()  # a copy a kill interrupted
    (archive / "heldout" / "t0.4" / "smollm2-sft-seed_s1.partial" / "submission.json").write_text("{}")
    before = cpu_table.comparison("frozenlake", ["grpo", "seed"], [1], [0.4, 0.0], runs, out, "mech")

    fresh_out, fresh_runs = tmp_path / "fresh" / "heldout", tmp_path / "fresh" / "runs"
    restored = cpu_table.restore_archive(archive, fresh_runs, fresh_out)
    assert sorted(restored) == sorted(
        ["t0.4/smollm2-sft", "greedy/smollm2-sft", "t0.4/smollm2-sft-grpo_s1", "greedy/smollm2-sft-grpo_s1"]
        + ["grpo_smollm2_frozenlake_s1"]
    )
    assert cpu_table.restore_archive(archive, fresh_runs, fresh_out) == []  # nothing twice
    after = cpu_table.comparison("frozenlake", ["grpo", "seed"], [1], [0.4, 0.0], fresh_runs, fresh_out, "mech")
    assert after == before and after["pending"] == ["seed seed 1"]
    assert after["stages"][0]["s_per_iteration"] == 9
    cmds = []
    monkeypatch.setattr(cpu_table, "run", lambda cmd, log, threads: cmds.append(cmd) or 0.0)
    cpu_table.train_and_evaluate("frozenlake", "grpo", 1, fresh_runs, fresh_out, 1, [0.4, 0.0], "mech", archive)
    assert cmds == []  # evaluated already: neither trained nor evaluated again
    # SFT evaluations run by hand before the comparison started: not run again, but archived
    other = tmp_path / "other-archive"
    cpu_table.evaluate_sft("frozenlake", tmp_path / "sft", fresh_out, 1, [0.4, 0.0], other)
    assert cmds == [] and (other / "heldout" / "greedy" / "smollm2-sft" / "submission.json").exists()

    sft = tmp_path / "sft"
    (sft / "model").mkdir(parents=True)
    (sft / "model" / "model.safetensors").write_bytes(b"weights")
    digest = cpu_table.check_sft(archive, sft, "OMP_NUM_THREADS=1 python baselines/sft.py --config X")
    assert json.loads((archive / "sft.json").read_text())["sha256"] == digest
    assert cpu_table.check_sft(archive, sft, "again") == digest  # the same weights: accepted
    assert "rebuilds" not in json.loads((archive / "sft.json").read_text())  # a run without a train.log: unknown
    # a fresh machine retrained the start (another train.log) with the same weights: recorded once as a rebuild, and
    # the comparison record carries it
    (sft / "train.log").write_text("2026-12-07 07:03:15 run sft_smollm2_frozenlake_mech (__main__) in X\nepoch 1/3\n")
    cpu_table.check_sft(archive, sft, "again")
    cpu_table.check_sft(archive, sft, "again")
    meta = json.loads((archive / "sft.json").read_text())
    assert [r["started"] for r in meta["rebuilds"]] == ["2026-12-07 07:03:15"]
    assert cpu_table.sft_provenance(meta)["sft_rebuilds"] == meta["rebuilds"]
    # the archive's own first run is not a rebuild of itself
    first = tmp_path / "first-archive"
    cpu_table.check_sft(first, sft, "python baselines/sft.py --config X")
    cpu_table.check_sft(first, sft, "again")
    assert json.loads((first / "sft.json").read_text())["started"] == "2026-12-07 07:03:15"
    assert "sft_rebuilds" not in cpu_table.sft_provenance(json.loads((first / "sft.json").read_text()))
    # it names the CPU that built the start (one thread gives the same weights on the same CPU, not on every one);
    # an archive from before the field learns it from the run that wrote it, not from a rebuild
    from agentgym.rl.runinfo import cpu_name

    assert json.loads((first / "sft.json").read_text())["versions"]["device_name"] == cpu_name()
    for name, started in [("old-first", "2026-12-07 07:03:15"), ("old-other", "2026-12-06 10:00:00")]:
        old = tmp_path / name
        old.mkdir()
        (old / "sft.json").write_text(
            json.dumps({"sha256": digest, "command": "c", "started": started, "versions": {}})
        )
        cpu_table.check_sft(old, sft, "again")
        assert json.loads((old / "sft.json").read_text())["versions"].get("device_name") == (
            cpu_name() if name == "old-first" else None
        )
    # before hours of rebuilding, the command says when the start was built on another CPU
    built_elsewhere = json.loads((archive / "sft.json").read_text())
    built_elsewhere["versions"]["device_name"] = "Another CPU, torch AVX2"
    (archive / "sft.json").write_text(json.dumps(built_elsewhere))
    cpu_table.warn_other_cpu(archive, tmp_path / "not-built-yet")
    assert "was built on Another CPU, torch AVX2, this machine is " + cpu_name() in capsys.readouterr().out
    (sft / "model" / "config.json").write_text("{}")
    cpu_table.warn_other_cpu(archive, sft)  # the start is here already: the hash check decides, nothing to rebuild
    cpu_table.warn_other_cpu(first, tmp_path / "not-built-yet")
    assert capsys.readouterr().out == ""  # built on this CPU: nothing to say
    (sft / "model" / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(SystemExit, match=r"built on Another CPU, torch AVX2\); .* built here on "):
        cpu_table.check_sft(archive, sft, "again")
    # the command itself refuses a machine whose SFT start differs before it restores anything from the archive:
    # those evaluations would read as runs from this start
    other_runs, other_out = tmp_path / "other" / "runs", tmp_path / "other" / "heldout"
    shutil.copytree(sft, other_runs / "sft_smollm2_frozenlake_mech")
    (other_runs / "sft_smollm2_frozenlake_mech" / "model" / "config.json").write_text("{}")
    with pytest.raises(SystemExit, match="started from the SFT checkpoint"):
        cpu_table.main(
            ["--env", "frozenlake", "--sft", "mech", "--methods", "grpo", "--seeds", "1", "--table-only"]
            + ["--runs", str(other_runs), "--out", str(other_out), "--archive", str(archive)]
        )
    assert not other_out.exists()
    assert cpu_table.sft_provenance(json.loads((first / "sft.json").read_text())) == {"sft_sha256": digest}
    # a lesson/reflection recipe: its archive says which privileged text it learned, and the record repeats it; an
    # archive from before the field was written with the first text
    from agentgym.agents.oracle import TEXT_VERSIONS

    (sft / "config.yaml").write_text("env_id: agentgym/Sokoban-v0\nlesson_rows: 96\n")
    (sft / "versions.json").write_text(json.dumps({"oracle_text": TEXT_VERSIONS["sokoban"]}))
    taught = tmp_path / "taught-archive"
    digest = cpu_table.check_sft(taught, sft, "python baselines/sft.py --config sft_smollm2_sokoban_mech.yaml")
    meta = json.loads((taught / "sft.json").read_text())
    assert cpu_table.sft_provenance(meta) == {"sft_sha256": digest, "oracle_text": TEXT_VERSIONS["sokoban"]}
    del meta["oracle_text"]
    assert cpu_table.sft_provenance(meta)["oracle_text"] == 1


def test_mechanism_probe_sorts_second_attempts_by_the_mistake_their_reflection_named():
    import mechanism_probe

    from agentgym.agent_io import EpisodeSpec
    from agentgym.agents import ExpertAgent, ScriptedAgent
    from agentgym.evaluation import run_episodes

    lake = ["SHFF", "FFFF", "FHFF", "FFFG"]

    def play(agent):
        spec = EpisodeSpec(seed=0, options={"map": lake})
        return run_episodes("agentgym/FrozenLakeNotSlippery-v0", agent, [spec]).episodes[0]

    first = play(ScriptedAgent(["down", "right", "down"]))  # into the hole below row 2 col 2 at step 3
    seconds = [
        play(ExpertAgent()),  # solved
        play(ScriptedAgent(["down", "right", "down"])),  # the named mistake again
        play(ScriptedAgent(["down", "down", "right"])),  # past it, into the same hole from the left
    ]
    out = mechanism_probe.second_attempt_outcomes([first] * 3, [0, 1, 2], seconds)
    assert out == {"second_solved": 1, "second_same_mistake": 1, "second_other_mistake": 1}


def test_cpu_table_keeps_a_linked_runs_folder_named_as_in_the_checkout(tmp_path, monkeypatch):
    """A ``runs`` that is a symlink (the runs kept on another disk) is still ``runs/...`` in the eval commands."""
    import cpu_table

    root = tmp_path / "checkout"
    (root / "tools").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "runs").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(cpu_table, "ROOT", root)
    runs = cpu_table.checkout_path("runs/mech")
    assert runs == root / "runs" / "mech" and cpu_table.checkout_path("runs/../runs/mech") == runs
    assert cpu_table.checkout_path(str(tmp_path / "abs")) == tmp_path / "abs"
    cmds = []
    monkeypatch.setattr(cpu_table, "run", lambda cmd, log, threads: cmds.append(cmd) or 0.0)
    cpu_table.evaluate("frozenlake", str(runs / "grpo_s1" / "model"), "x", root / "runs" / "heldout", 1, 0.4)
    assert cmds[0][cmds[0].index("--agent") + 1] == "hf:runs/mech/grpo_s1/model"
