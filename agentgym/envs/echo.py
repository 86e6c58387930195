"""EchoBandit: a tiny "say the word" task for tests and CPU learning checks of the LLM stack.

Not a benchmark. It exists so the rollout engine, the agents and the RL baselines can be tested in
milliseconds with a tiny random model, and so a learning test can show reward rising on CPU.
"""

from __future__ import annotations

from typing import Any

from agentgym.core import TextEnv, action_length_error, normalize_action

WORDS = ("apple", "river", "stone", "cloud", "green", "light", "table", "music")


class EchoBanditEnv(TextEnv):
    """Say the word the observation names.

    ## Description
    Each episode draws a target word from a fixed list of 8; the agent must answer with that word.
    Wrong answers give the prompt again, so episodes last 1 to ``max_episode_steps`` turns (an
    env for testing multi-turn machinery where episodes end at different turns).

    ## Action Space
    Text: one word (case and surrounding spaces ignored).

    ## Observation Space
    Text: ``"Say the word: <w>."`` (after a miss: ``"Wrong. Say the word: <w>."``). With ``hidden=True`` the
    observation names a cue instead, ``"Say the word after: <c>."`` (the target is the word after ``c`` in
    the fixed cycle of 8 words), and only the feedback after a miss gives the answer:
    ``"Wrong. The word after <c> is <w>."`` -- a task where a retry with the feedback in context knows more
    than the first attempt (the situation ERL's reflections are for).

    ## Starting State
    The target word and the order of the 4 admissible words are drawn from ``self.np_random``.

    ## Rewards
    1 for the target word, 0 otherwise.

    ## Episode End
    Terminates on the target word; truncated by ``max_episode_steps`` (TimeLimit).

    ## Information
    ``is_action_valid`` (the action is one of the admissible words), ``invalid_reason``, ``success``,
    ``task_id`` (the target word), ``admissible_actions`` (4 words, the target among them), ``task``.

    ## Arguments
    ``num_choices``: how many admissible words are listed (2..8). ``hidden``: show a cue, not the word.

    ## Registered Configurations
    ``agentgym/EchoBandit-v0``: 3 turns at most. ``agentgym/EchoBanditHidden-v0``: the same with ``hidden=True``.

    ## Version History
    * v0: first version (test env of the LLM agents stack).
    """

    def __init__(self, num_choices: int = 4, hidden: bool = False, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        if not 2 <= num_choices <= len(WORDS):
            raise ValueError(f"num_choices must be in 2..{len(WORDS)}, got {num_choices}")
        self.num_choices = num_choices
        self.hidden = bool(hidden)
        self.target = WORDS[0]
        self.choices: list[str] = []

    def _info(self, **kw: Any) -> dict[str, Any]:
        task = f"say the word after {self.cue}." if self.hidden else f"say the word {self.target}."
        return self.make_info(task_id=self.target, admissible_actions=list(self.choices), task=task, **kw)

    @property
    def cue(self) -> str:
        """The word before the target in the fixed cycle (what ``hidden=True`` shows)."""
        return WORDS[(WORDS.index(self.target) - 1) % len(WORDS)]

    def _prompt(self, missed: bool) -> str:
        if self.hidden:
            return (
                f"Wrong. The word after {self.cue} is {self.target}." if missed else f"Say the word after: {self.cue}."
            )
        return f"Wrong. Say the word: {self.target}." if missed else f"Say the word: {self.target}."

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        idx = self.np_random.permutation(len(WORDS))[: self.num_choices]
        self.choices = [WORDS[i] for i in idx]
        self.target = self.choices[int(self.np_random.integers(self.num_choices))]
        self._last_observation = self._prompt(missed=False)
        return self._last_observation, self._info()

    def step(self, action: str):
        text = normalize_action(action)
        too_long = action_length_error(text)
        word = text.strip().strip(".").lower() if too_long is None else ""
        if word == self.target:
            self._last_observation = "Correct."
            return self._last_observation, 1.0, True, False, self._info(success=True)
        valid = word in self.choices
        self._last_observation = self._prompt(missed=True)
        reason = None if valid else too_long or f"{word!r} is not one of {', '.join(self.choices)}"
        return self._last_observation, 0.0, False, False, self._info(is_action_valid=valid, invalid_reason=reason)

    def expert_action(self) -> str:
        return self.target
