"""Config files that inherit a base file (``base: FILE``): what a row overrides, adds and where bases are found."""

from __future__ import annotations

import pytest

from agentgym.rl.config import Args, config_chain, load_config_file, parse_args, read_config


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_row_overrides_its_base_in_place_and_adds_its_own_keys(tmp_path):
    _write(tmp_path / "base" / "proto.yaml", "num_tasks: 16\ngroup_size: 8\nlearning_rate: 1.0e-6\n_seeds: [1, 2]\n")
    row = _write(tmp_path / "row.yaml", "base: base/proto.yaml\ngroup_size: 4\nseed: 3\n")
    assert read_config(row) == {"num_tasks": 16, "group_size": 4, "learning_rate": 1e-6, "_seeds": [1, 2], "seed": 3}
    assert list(read_config(row)) == ["num_tasks", "group_size", "learning_rate", "_seeds", "seed"]
    assert load_config_file(row) == {"num_tasks": 16, "group_size": 4, "learning_rate": 1e-6, "seed": 3}
    # the resolved values are the Args defaults, and flags still override them
    args = parse_args(Args, ["--config", str(row), "--num-tasks", "2"])
    assert (args.num_tasks, args.group_size, args.learning_rate, args.seed) == (2, 4, 1e-6, 3)


def test_bases_chain_and_paths_are_relative_to_the_file_that_names_them(tmp_path, monkeypatch):
    _write(tmp_path / "base" / "protocol.yaml", "num_tasks: 16\ngroup_size: 8\nmax_turns: 50\n")
    _write(tmp_path / "base" / "method.yaml", "base: protocol.yaml\ngroup_size: 1\nbeta: 0.0\n")
    row = _write(tmp_path / "rows" / "deep" / "row.yaml", "base: ../../base/method.yaml\nmax_turns: 15\n")
    monkeypatch.chdir(tmp_path / "rows")  # not where any path is relative to
    assert [p.name for p, _ in config_chain(row)] == ["protocol.yaml", "method.yaml", "row.yaml"]
    assert read_config(row) == {"num_tasks": 16, "group_size": 1, "max_turns": 15, "beta": 0.0}
    # JSON and TOML files may name a base too, and a YAML base may serve them
    toml = _write(tmp_path / "rows" / "row.toml", 'base = "../base/method.yaml"\nmax_turns = 30\n')
    assert read_config(toml)["max_turns"] == 30 and read_config(toml)["group_size"] == 1


def test_a_missing_base_is_one_line_naming_the_file_and_the_path(tmp_path):
    row = _write(tmp_path / "row.yaml", "base: base/nope.yaml\nseed: 1\n")
    with pytest.raises(FileNotFoundError) as err:
        load_config_file(row)
    msg = str(err.value)
    assert "\n" not in msg and str(row) in msg and "base/nope.yaml" in msg and "does not exist" in msg


@pytest.mark.parametrize("ring", [["a"], ["a", "b"], ["a", "b", "c"]], ids=len)
def test_bases_that_form_a_cycle_are_refused(tmp_path, ring):
    for name, nxt in zip(ring, ring[1:] + ring[:1]):
        _write(tmp_path / f"{name}.yaml", f"base: {nxt}.yaml\nseed: 1\n")
    with pytest.raises(ValueError, match="cycle") as err:
        read_config(tmp_path / "a.yaml")
    assert "\n" not in str(err.value)


def test_base_must_name_one_file(tmp_path):
    row = _write(tmp_path / "row.yaml", "base: [a.yaml, b.yaml]\n")
    with pytest.raises(ValueError, match="one file path"):
        read_config(row)
