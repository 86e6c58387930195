"""Named evaluation protocols: which episodes of which envs make up a leaderboard column.

A :class:`Suite` is a fixed, versioned list of ``(env_id, EpisodeSpec)`` tasks. ``agentgym eval --suite
NAME`` plays exactly these tasks, and ``agentgym leaderboard verify`` checks that a submission holds every
one of them exactly once. Anything that changes which episodes a suite contains bumps its ``version``.

Suites (see :data:`SUITES`):

* ``alfworld-eval``: the 140 ``valid_seen`` + 134 ``valid_unseen`` ALFWorld games (``{"split", "index"}``).
* ``alfworld-valid_unseen``: the 134 ``valid_unseen`` games only (out-of-distribution column).
* ``webshop-test``: the 500 WebShop test goals (``{"split": "test", "index": i}``), as the original
  engine splits its seed-233-shuffled goal list (goals 0-499 are the test set).
* ``sokoban`` / ``frozenlake``: 100 fixed reset seeds each (100000-100099, disjoint from the small
  seeds training runs start from), 6x6 one-box Sokoban and slippery 4x4 FrozenLake as RAGEN plays them.
* ``sokoban-erl`` / ``frozenlake-erl``: the same seeds on the letter-symbol twins that ERL trains on
  (``agentgym/SokobanLetters-v0``, ``agentgym/FrozenLakeLetters-v0``).
* ``hotpotqa-dev``: 100 HotpotQA dev questions by index (``{"index": i}``), i.e. the 100-question
  distractor sample shipped with the shared data; a suite over the full dev set would be a new name.
* ``hotpotqa-erl``: the same 100 questions on ``agentgym/HotpotQAERL-v0`` (ERL's setup: open setting,
  5 retrieved paragraphs per search, answers in ``\\boxed{}``, 5 turns).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from agentgym.agent_io import EpisodeSpec

#: ALFWorld eval split sizes (json_2.1.1): valid_seen, valid_unseen.
ALFWORLD_SPLITS: dict[str, int] = {"valid_seen": 140, "valid_unseen": 134}
#: Number of WebShop test goals (the first 500 of the original engine's shuffled goal list).
WEBSHOP_TEST_GOALS = 500
#: First reset seed of the seeded (procedurally generated) suites.
EVAL_SEED_BASE = 100_000


@dataclass(frozen=True)
class SuiteTask:
    """One episode of a suite: the env and the reset seed/options."""

    env_id: str
    spec: EpisodeSpec

    def key(self) -> str:
        """A string identifying the task (env id + seed + options), used to match logged episodes."""
        return f"{self.env_id} {self.spec.key()}"


@dataclass(frozen=True)
class Suite:
    """A named, versioned evaluation protocol.

    Attributes:
        name: the suite name (``sokoban``).
        version: bumped whenever the task list changes.
        description: one line for the leaderboard.
        tasks: every task, in play order.
        data: data families the suite's envs need (empty for procedural envs).
    """

    name: str
    version: str
    description: str
    tasks: tuple[SuiteTask, ...] = field(repr=False)
    data: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """``name@version``, the string stored in submissions."""
        return f"{self.name}@{self.version}"

    @property
    def env_ids(self) -> list[str]:
        """The suite's env ids in first-appearance order."""
        return list(dict.fromkeys(t.env_id for t in self.tasks))

    def specs(self, env_id: str) -> list[EpisodeSpec]:
        """The episode specs of one env of the suite, in order."""
        return [t.spec for t in self.tasks if t.env_id == env_id]

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[SuiteTask]:
        return iter(self.tasks)


def _alfworld(splits: tuple[str, ...]) -> tuple[SuiteTask, ...]:
    # Seed 0 everywhere: the game is chosen by the options; the seed only fixes any env-side sampling.
    return tuple(
        SuiteTask("agentgym/ALFWorld-v0", EpisodeSpec(0, {"split": split, "index": i}))
        for split in splits
        for i in range(ALFWORLD_SPLITS[split])
    )


def _seeded(env_id: str, n: int = 100) -> tuple[SuiteTask, ...]:
    return tuple(SuiteTask(env_id, EpisodeSpec(EVAL_SEED_BASE + i, None)) for i in range(n))


def _build() -> dict[str, Suite]:
    suites = [
        Suite(
            "alfworld-eval",
            "1",
            "ALFWorld: all 274 eval games (140 valid_seen + 134 valid_unseen), 50 steps each",
            _alfworld(("valid_seen", "valid_unseen")),
            data=("alfworld",),
        ),
        Suite(
            "alfworld-valid_unseen",
            "1",
            "ALFWorld: the 134 valid_unseen games (unseen rooms), 50 steps each",
            _alfworld(("valid_unseen",)),
            data=("alfworld",),
        ),
        Suite(
            "webshop-test",
            "1",
            "WebShop: the 500 test goals of the 1k-product catalogue, 15 steps each",
            tuple(
                SuiteTask("agentgym/WebShop-v0", EpisodeSpec(0, {"split": "test", "index": i}))
                for i in range(WEBSHOP_TEST_GOALS)
            ),
            data=("webshop",),
        ),
        Suite(
            "sokoban",
            "1",
            "Sokoban 6x6, one box, 10 actions: 100 fixed seeds",
            _seeded("agentgym/Sokoban-v0"),
        ),
        Suite(
            "frozenlake",
            "1",
            "FrozenLake 4x4, slippery, 10 actions: 100 fixed seeds",
            _seeded("agentgym/FrozenLake-v0"),
        ),
        Suite(
            "frozenlake-notslippery",
            "1",
            "FrozenLake 4x4, not slippery, 10 actions: the same 100 seeds (the cpu SmolLM2 runs' held-out set)",
            _seeded("agentgym/FrozenLakeNotSlippery-v0"),
        ),
        Suite(
            "sokoban-erl",
            "1",
            "Sokoban 6x6, one box, in ERL's letter symbols: the same 100 seeds",
            _seeded("agentgym/SokobanLetters-v0"),
        ),
        Suite(
            "frozenlake-erl",
            "1",
            "FrozenLake 4x4, slippery, in ERL's letter symbols: the same 100 seeds",
            _seeded("agentgym/FrozenLakeLetters-v0"),
        ),
        Suite(
            "hotpotqa-dev",
            "1",
            "HotpotQA distractor dev: the 100-question sample, by index",
            tuple(SuiteTask("agentgym/HotpotQA-v0", EpisodeSpec(0, {"index": i})) for i in range(100)),
            data=("hotpotqa",),
        ),
        Suite(
            "hotpotqa-erl",
            "1",
            "HotpotQA in ERL's setup (open setting, top-5 search, boxed answer, 5 turns): the same 100 questions",
            tuple(SuiteTask("agentgym/HotpotQAERL-v0", EpisodeSpec(0, {"index": i})) for i in range(100)),
            data=("hotpotqa",),
        ),
    ]
    return {s.name: s for s in suites}


#: Every suite by name.
SUITES: dict[str, Suite] = _build()


def get_suite(name: str) -> Suite:
    """The suite called ``name`` (``name@version`` is accepted and the version checked).

    Raises:
        KeyError: unknown name or version, with the list of known suites.
    """
    base, _, version = name.partition("@")
    if base not in SUITES:
        raise KeyError(f"unknown suite {base!r}; known suites: {', '.join(SUITES)}")
    suite = SUITES[base]
    if version and version != suite.version:
        raise KeyError(f"suite {base!r} is at version {suite.version}, not {version!r}")
    return suite
