"""``agentgym/ALFWorld-v0``: ALFWorld's household text games on the real engine (alfworld 0.4.2 + textworld 1.7)."""

from __future__ import annotations

import operator
import re
from typing import Any

from agentgym.core import TextEnv, action_length_error, normalize_action
from agentgym.envs.alfworld import games as games_mod
from agentgym.envs.alfworld.engine import make_engine
from agentgym.envs.alfworld.wording import HIDDEN_COMMANDS, WORDINGS, apply_wording, command_aliases

#: Reply of the game to a command it does not know (the engine's own wording).
NOTHING_HAPPENS = "Nothing happens."
_SPACES = re.compile(r"\s+")


class ALFWorldEnv(TextEnv):
    """ALFWorld (TextWorld side): reach a household goal by text commands, as SEED, SAPO, GiGPO, ReAct report.

    ## Description
    Each episode is one ALFWorld game (a ``game.tw-pddl`` of the json_2.1.1 release): a room with
    receptacles and objects and a goal of one of six task types (``pick``, ``look``, ``clean``, ``heat``,
    ``cool``, ``pick2``). The game runs on textworld's PDDL engine exactly as ``alfworld`` 0.4.2 plays it
    (``AlfredDemangler`` names: ``desk 1``, ``alarmclock 2``), behind a cache that makes resets cheap
    (see :mod:`agentgym.envs.alfworld.engine`).

    **Before training or a long evaluation, run** ``agentgym data prepare alfworld --compile --split train`` (or
    the split you will play): a game's first reset otherwise compiles it (PDDL to SAS, ~0.3-0.6 s each, so a run
    that meets thousands of train games spends most of its reset time compiling); the command compiles every
    game of the split on all cores into the disk cache (``$AGENTGYM_CACHE/alfworld/compiled``), after which a
    game's first reset in any process reads it from there. Run it again after upgrading textworld,
    fast-downward or alfworld (the cache is keyed by their versions); it skips games already compiled.

    ## Action Space
    ``Text``: one command, e.g. ``go to desk 1``, ``take mug 1 from desk 1``, ``move mug 1 to shelf 2``,
    ``open fridge 1``, ``heat egg 1 with microwave 1``, ``use desklamp 1``, ``look``, ``inventory``.
    Leading/trailing spaces are stripped, runs of whitespace collapsed and case folded before matching.
    Both put wordings are accepted in every variant: ``move X to Y`` (alfworld 0.4.x) and ``put X in/on Y``,
    ``put X in Y``, ``put X on Y`` (0.3.x); a spelling that is not admissible but whose alias is, is played
    as the alias (``info["action"]`` shows what was played).

    ## Observation Space
    ``Text``. After ``reset``: the game's intro, ``-= Welcome to TextWorld, ALFRED! =-``, the room
    description and ``Your task is to: ...``. After ``step``: the game's feedback. With the default
    ``wording="move"`` observations and admissible actions use alfworld 0.4.x wording (``move X to Y``,
    ``You move the X to the Y.``, ``You arrive at desk 1.``, a ``help`` command); ``wording="put"``
    (``agentgym/ALFWorldPut-v0``) plays the same games with 0.3.x wording (``put X in/on Y``,
    ``You put the X in/on the Y.``, ``You arrive at loc 5.``, no ``help``), the wording of results
    published before late 2024.

    ## Starting State
    ``reset(seed=..., options=...)`` picks the game:
    ``{"gamefile": PATH}``; ``{"task_id": "valid_seen/<folder>/<trial>"}``; ``{"split": S, "index": i}``
    (``i`` into the sorted game list of split ``S``, so a split is covered exactly once by ``i = 0..n-1``);
    ``{"split": S}`` or no options: a game of ``S`` (default: the ``split`` argument) drawn with
    ``self.np_random``. Splits: ``train`` (3,553), ``valid_seen`` (140), ``valid_unseen`` (134),
    ``valid_train`` (200).

    ## Rewards
    1 on the step that solves the task, else 0.

    ## Episode End
    Terminated when the task is solved. Truncated after 50 steps (``max_episode_steps=50`` at
    registration, the limit of ALFWorld's papers and of ReAct/SEED/GiGPO).

    ## Information
    Every ``info``: ``is_action_valid`` (False when the command was not admissible, or longer than
    :data:`agentgym.core.MAX_ACTION_LENGTH`; the game then says "Nothing happens." and the state is unchanged), ``invalid_reason`` (only when invalid), ``success``
    (task solved), ``task_id`` (``split/folder/trial``), ``task_type``, ``task`` (the goal sentence),
    ``gamefile``, ``admissible_actions`` (sorted list of the commands the game accepts now) and, after a
    step, ``action`` (the command played, after normalisation and wording aliases, or None).

    ## Arguments
    * ``split``: default split for ``reset`` without a game choice (``"train"``).
    * ``wording``: ``"move"`` (0.4.x, default) or ``"put"`` (0.3.x), see above.
    * ``render_mode``: ``"ansi"`` returns the last observation.

    ## Registered Configurations
    * ``agentgym/ALFWorld-v0``: ``wording="move"``, 50 steps.
    * ``agentgym/ALFWorldPut-v0``: ``wording="put"``, 50 steps.

    ## Version History
    * v0: follows ALFWorld (Shridhar et al., ICLR 2021; alfworld 0.4.2 TextWorld engine, json_2.1.1 games).
    """

    def __init__(self, split: str = "train", wording: str = "move", render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        if split not in games_mod.SPLITS:
            raise ValueError(f"unknown ALFWorld split {split!r}; choose from {', '.join(games_mod.SPLITS)}")
        if wording not in WORDINGS:
            raise ValueError(f"wording must be one of {WORDINGS}, got {wording!r}")
        self.split = split
        self.wording = wording
        self._engine = make_engine()
        self._state: Any = None
        self._meta: dict[str, Any] = {}
        self._plan: list[str] | None = None  # the expert's remaining commands, None after a deviation
        self._won = False

    # -- game choice ---------------------------------------------------------------------------------
    def _choose_game(self, options: dict[str, Any]) -> str:
        unknown = set(options) - {"gamefile", "task_id", "split", "index"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; use gamefile, task_id, or split + index")
        if options.get("gamefile"):
            return str(options["gamefile"])
        if options.get("task_id"):
            return games_mod.find_game(str(options["task_id"]))
        split = options.get("split") or self.split
        files = games_mod.list_games(split)
        index = options.get("index")
        if index is None:
            return files[int(self.np_random.integers(len(files)))]
        try:
            index = operator.index(index)
        except TypeError:
            raise ValueError(f"options['index'] must be an integer, got {index!r}") from None
        if not 0 <= index < len(files):
            raise ValueError(f"options['index']={index} is out of range for split {split!r} ({len(files)} games)")
        return files[index]

    # -- gymnasium API -------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        gamefile = self._choose_game(dict(options or {}))
        data = apply_wording(games_mod.load_game(gamefile), self.wording)
        self._state = self._engine.start(data)
        task_id = games_mod.task_id_of(gamefile)
        folder = task_id.split("/")[-2] if task_id.count("/") >= 2 else ""
        try:
            task_type = games_mod.task_type_of(folder)
        except ValueError:
            task_type = None  # a game file outside the release layout
        obs = self._state.feedback
        task = obs.rsplit("Your task is to:", 1)[-1].strip() if "Your task is to:" in obs else ""
        self._meta = {"task_id": task_id, "task_type": task_type, "task": task, "gamefile": gamefile}
        self._plan = list(data["walkthrough"])
        self._won = False
        self._last_observation = obs
        return obs, self._info()

    def _info(self, **extra: Any) -> dict[str, Any]:
        return self.make_info(
            success=self._won,
            admissible_actions=self._admissible(),
            task_type=self._meta["task_type"],
            task=self._meta["task"],
            gamefile=self._meta["gamefile"],
            **{"task_id": self._meta["task_id"], **extra},
        )

    def _admissible(self) -> list[str]:
        hidden = HIDDEN_COMMANDS[self.wording]
        return [c for c in self._state["admissible_commands"] if c not in hidden]

    def _resolve(self, action: str) -> str | None:
        admissible = self._admissible()
        if action in admissible:
            return action
        for alias in command_aliases(action):
            if alias in admissible:
                return alias
        return None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        text = normalize_action(action)
        too_long = action_length_error(text)
        command = _SPACES.sub(" ", text).strip().lower() if too_long is None else ""
        played = self._resolve(command) if command else None
        if played is None:
            # The engine answers unknown commands with "Nothing happens." and leaves the state alone; we
            # answer the same without re-deriving the (unchanged) admissible commands.
            if too_long is not None:
                reason = too_long
            elif not command:
                reason = "empty action"
            elif len(text) > 500:
                reason = f"not an admissible command ({len(text)} characters)"
            else:
                reason = f"{command!r} is not an admissible command"
            self._last_observation = NOTHING_HAPPENS
            info = self._info(is_action_valid=False, invalid_reason=reason, action=None)
            return NOTHING_HAPPENS, 0.0, False, False, info
        self._state, _, _ = self._engine.step(played)
        if self._plan is not None:
            self._plan = self._plan[1:] if self._plan and self._plan[0] == played else None
        self._won = bool(self._state["won"])
        obs = self._state.feedback
        self._last_observation = obs
        return obs, (1.0 if self._won else 0.0), self._won, False, self._info(action=played)

    def expert_action(self) -> str:
        """The next step of the game's walkthrough; after a deviation, the PDDL planner's next step.

        The fallback is alfworld's ``planner`` expert (``AlfredExpert(expert_type="planner")``, i.e. textworld's
        ``policy_commands``): fast-downward replans from the current state. Its plan is then followed until
        the agent deviates again.
        """
        if self._state is None:
            raise RuntimeError("call reset() before expert_action()")
        admissible = self._admissible()
        if self._plan and self._plan[0] in admissible:
            return self._plan[0]
        plan = self._engine.replan()
        if plan and plan[0] in admissible:
            self._plan = plan
            return plan[0]
        self._plan = None
        return "look"

    def close(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.close()
            self._engine = None
        super().close()
