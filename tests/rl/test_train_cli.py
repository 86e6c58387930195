"""`agentgym train` dispatches through the explicit TRAINERS table; data families register from the envs."""

from __future__ import annotations

import pytest

from agentgym.rl.cli import ALGORITHMS, TRAINERS, load_trainer, train_main


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_table_entry_loads_a_runnable_baseline(algo):
    module = load_trainer(algo)
    assert module.__name__ == f"baselines.{algo}"
    assert callable(module.main) and hasattr(module, "Args")


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


def test_data_families_are_registered_by_the_envs_package():
    import agentgym.envs  # noqa: F401  (registers them)
    from agentgym import data

    assert set(data.FAMILIES) == {"alfworld", "webshop", "hotpotqa"}
    assert data._module("hotpotqa").__name__ == "agentgym.envs.hotpotqa.data"
    with pytest.raises(SystemExit, match="unknown data set 'nope'"):
        data._module("nope")
