"""One tiny random model for every test of the model server and its engine."""

from __future__ import annotations

import pytest
import torch

from agentgym.models.tiny import make_tiny_model

torch.set_num_threads(1)  # tiny models run fastest on one thread (see tests/agents/test_llm_agents.py)


@pytest.fixture(scope="session")
def tiny():
    return make_tiny_model(seed=0)
