"""`agentgym train` dispatches through the explicit TRAINERS table and parses a run's config once."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from baselines.cli import ALGORITHMS, TRAINERS, load_trainer, train_main


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_table_entry_loads_a_runnable_baseline(algo):
    module = load_trainer(algo)
    assert module.__name__ == f"baselines.{algo}"
    assert callable(module.train) and callable(module.main) and hasattr(module, "Args")


def test_unknown_algorithm_is_a_one_line_error_listing_the_table(capsys):
    assert train_main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "no baseline 'nope'" in err and "grpo" in err and "Traceback" not in err
    with pytest.raises(KeyError):
        load_trainer("nope")


def test_help_lists_the_table(capsys):
    assert train_main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in TRAINERS)


def _fake_grpo(monkeypatch) -> list:
    """GRPO's ``Args`` with a ``train`` that records what it was given (and ``sys.argv`` at that moment)."""
    runs: list = []
    fake = SimpleNamespace(Args=load_trainer("grpo").Args, train=lambda args: runs.append((args, list(sys.argv))))
    monkeypatch.setitem(TRAINERS, "grpo", fake)
    return runs


def test_the_config_is_read_once_and_flags_given_after_it_win(monkeypatch, tmp_path):
    import agentgym.rl.config as config

    runs = _fake_grpo(monkeypatch)
    reads: list[str] = []
    load = config.load_config_file
    monkeypatch.setattr(config, "load_config_file", lambda path: reads.append(str(path)) or load(path))
    (tmp_path / "run.yaml").write_text("seed: 2\nlearning_rate: 3.0e-6\n")
    argv_before = list(sys.argv)

    assert train_main(["grpo", "--config", str(tmp_path / "run.yaml"), "--seed", "5"]) == 0
    ((args, argv_in_train),) = runs
    assert reads == [str(tmp_path / "run.yaml")]
    assert (args.seed, args.learning_rate) == (5, 3.0e-6)
    assert argv_in_train == argv_before == sys.argv  # the process's own command line, as typed


def test_the_help_of_a_baseline_names_the_command_typed(capsys):
    with pytest.raises(SystemExit) as exit_:
        train_main(["grpo", "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: agentgym train grpo")


def test_an_init_from_flag_overrides_the_config_and_a_missing_run_is_one_line(monkeypatch, tmp_path):
    runs = _fake_grpo(monkeypatch)
    (tmp_path / "run.yaml").write_text(f"init_from: {tmp_path / 'missing'}\n")
    with pytest.raises(SystemExit, match=r"init_from .*missing: no checkpoint there"):
        train_main(["grpo", "--config", str(tmp_path / "run.yaml")])
    (tmp_path / "sft_run").mkdir()
    (tmp_path / "sft_run" / "state.pt").write_bytes(b"")  # a finished run folder
    assert train_main(["grpo", "--config", str(tmp_path / "run.yaml"), "--init-from", str(tmp_path / "sft_run")]) == 0
    assert runs[0][0].init_from == str(tmp_path / "sft_run")
