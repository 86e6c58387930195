"""What an agent receives and returns (AgentInput, Generation, AgentAction) and which episode it plays (EpisodeSpec).

They sit below prompts, agents, the turn loop and the leaderboard so that every layer can name them
without importing another layer's code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentgym.episodes import Episode


@dataclass
class AgentInput:
    """What an agent knows about one live episode when it must act."""

    env_id: str
    observation: str
    info: dict[str, Any]
    first_observation: str = ""
    history: list[tuple[str, str]] = field(default_factory=list)  # (observation, action) before this turn
    #: Always None from the turn loop (a task id can name the reset seed); logs keep it. ``info`` likewise
    #: holds only the agent-facing keys (see :mod:`agentgym.loop`).
    task_id: str | None = None
    episode_index: int = 0
    #: Filled by the runner only for agents with ``privileged = True`` (experts): the env's expert move.
    expert_action: str | None = None

    @property
    def turn(self) -> int:
        return len(self.history)


@dataclass
class Generation:
    """What a token-level policy sampled for one action: the training row of the turn (never logged).

    Attributes:
        messages: the chat prompt.
        prompt_ids: its tokens (cut on the left when still too long after dropping history: ``prompt_cut``).
        response_ids: the sampled tokens (EOS included when the model stopped by itself).
        logprobs: per-token log-probs of ``response_ids`` at sampling time (None unless asked for).
    """

    messages: list[dict[str, str]]
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] | None = None
    prompt_cut: bool = False


@dataclass
class AgentAction:
    """An agent's answer for one episode."""

    action: str
    output: str | None = None  # raw model text; None for scripted agents
    prompt_tokens: int = 0
    completion_tokens: int = 0
    format_valid: bool = True  # False when the output could not be parsed into an action
    extras: dict[str, Any] = field(default_factory=dict)  # written to the step's log record
    generation: Generation | None = None  # token-level backends only; what RL trains on (not logged)


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play: the reset seed and options (e.g. ``{"split": "valid_unseen", "index": 3}``)."""

    seed: int | None
    options: dict[str, Any] | None = None

    def key(self) -> str:
        return json.dumps([self.seed, self.options], sort_keys=True)


def episode_key(episode: Episode) -> str:
    return EpisodeSpec(episode.seed, episode.options).key()


def seed_specs(n: int, seed: int = 0, options: dict[str, Any] | None = None) -> list[EpisodeSpec]:
    """``n`` episodes with consecutive seeds ``seed, seed+1, ...``."""
    return [EpisodeSpec(seed + i, options) for i in range(n)]
