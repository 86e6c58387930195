"""The one env-id parser (agentgym.core.parse_env_id) and the modules that read families through it."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym.core import EnvId, env_family, env_version, parse_env_id
from agentgym.prompts import TEMPLATES, get_template
from agentgym.results import columns
from agentgym.rl.rewards import success_scale_for


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("agentgym/Sokoban8x8B2-v0", EnvId("agentgym", "Sokoban8x8B2", 0, "Sokoban")),
        ("agentgym:agentgym/WebShopBrowser-v12", EnvId("agentgym", "WebShopBrowser", 12, "WebShop")),
        ("agentgym/HotpotQAERL-v0", EnvId("agentgym", "HotpotQAERL", 0, "HotpotQA")),
        ("agentgym/EchoBandit-v0", EnvId("agentgym", "EchoBandit", 0, None)),
        ("CartPole-v1", EnvId(None, "CartPole", 1, None)),
        ("agentgym/ALFWorld", EnvId("agentgym", "ALFWorld", None, "ALFWorld")),
    ],
)
def test_parse_env_id(env_id, expected):
    assert parse_env_id(env_id) == expected
    assert env_family(env_id) == expected.family


def test_env_version_needs_a_version():
    assert env_version("agentgym/Sokoban-v3") == 3
    with pytest.raises(ValueError, match="does not end in -vN"):
        env_version("agentgym/Sokoban")


def test_every_registered_id_has_one_family_for_templates_results_and_rewards():
    for env_id in (i for i in gym.registry if i.startswith("agentgym/")):
        fam = env_family(env_id)
        assert env_version(env_id) >= 0
        assert type(get_template(env_id)) in TEMPLATES[fam if fam in TEMPLATES else "*"].values()
        assert (columns(env_id) == ["Success", "Return"]) == (fam not in ("ALFWorld", "WebShop", "HotpotQA"))
        assert (success_scale_for(env_id) is not None) == (fam in ("ALFWorld", "WebShop"))
