"""The answer parser finds the same blocks as its regexes, in linear time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.prompts.base import _ACTION_CLOSE, _ACTION_OPEN, _ACTION_RE, _THINK_RE, _blocks, parse_action

PIECES = ["<action>", "</action>", "<ACTION>", "</Action>", "<think>", "</think>", "a", " ", "\n", "<", ">", "/"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_blocks_equal_findall(text):
    from agentgym.prompts.base import _THINK_CLOSE, _THINK_OPEN

    assert _blocks(text, _ACTION_OPEN, _ACTION_CLOSE) == _ACTION_RE.findall(text)
    assert _blocks(text, _THINK_OPEN, _THINK_CLOSE) == _THINK_RE.findall(text)


@pytest.mark.timeout(60)  # a hang guard: the regexes took 12 s on 64 KB of "<action>", hours on 1 MiB
def test_degenerate_outputs_parse(tmp_path):
    for unit, valid in [("<action>", False), ("<think>", False), ("</action><action>", False)]:
        parsed = parse_action(unit * ((1 << 20) // len(unit)))
        assert parsed.valid is valid and parsed.action == ""
    parsed = parse_action("<think>" * 100_000 + "</think><action>up</action>" + "<action>" * 100_000)
    assert parsed.valid and parsed.action == "up"
