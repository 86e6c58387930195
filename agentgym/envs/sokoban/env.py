"""Text Sokoban as RAGEN and verl-agent train LLM agents on it, with seeded, solver-checked levels."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium.error import ResetNeeded

from agentgym.core import CHARSET, TextEnv, action_length_error, normalize_action, text_space
from agentgym.envs.sokoban.generator import ROLES, Level, generate_level, level_from_text
from agentgym.envs.sokoban.solver import DIRECTIONS, offsets, solve

_RAGEN = {
    "wall": "#",
    "floor": "_",
    "target": "O",
    "box_on_target": "√",
    "box": "X",
    "player": "P",
    "player_on_target": "S",
}
# ERL (microsoft/experiential_rl examples/erl_sokoban/erl_sokoban_agent.py DEFAULT_SYMBOLS): letters whose
# meaning the agent must learn, each cell rendered as " <letter> \t" (rllm SokobanEnv.GRID_LOOKUP).
_ERL = {
    "wall": "E",
    "floor": "D",
    "target": "C",
    "box_on_target": "b",
    "box": "B",
    "player": "A",
    "player_on_target": "a",
}

#: Named symbol sets (role -> the text of one cell).
#:
#: * ``ragen``: RAGEN's symbols (``ragen/env/sokoban/config.py`` grid_lookup) one character per cell.
#: * ``ragen_padded``: the same with each cell padded by spaces (``" # "``), exactly RAGEN's current text.
#: * ``ragen_vocab``: RAGEN's ``SokobanDifferentGridVocab`` (``config/envs.yaml``): ``W . G C B A @``.
#: * ``erl``: ERL's letters ``E D C b B A a`` (wall, floor, target, box on target, box, player, player on
#:   target), each cell ``" A \t"`` as ERL renders it.
SYMBOL_SETS: dict[str, dict[str, str]] = {
    "ragen": dict(_RAGEN),
    "ragen_padded": {role: f" {sym} " for role, sym in _RAGEN.items()},
    "ragen_vocab": {
        "wall": "W",
        "floor": ".",
        "target": "G",
        "box_on_target": "C",
        "box": "B",
        "player": "A",
        "player_on_target": "@",
    },
    "erl": {role: f" {sym} \t" for role, sym in _ERL.items()},
}

#: Canonical action names, in direction-index order (RAGEN's ``action_lookup`` 1 Up, 2 Down, 3 Left, 4 Right).
ACTIONS: tuple[str, ...] = DIRECTIONS
_MAX_ACTION_CHARS = 64  # longer strings cannot be an action: reject before any string work on them


def _action_table(names: tuple[str, ...]) -> dict[str, int]:
    table: dict[str, int] = {}
    for i, name in enumerate(names):
        for form in (name, name[0], str(i + 1), f"move {name}", f"go {name}", f"push {name}"):
            table[form] = i
    return table


_ACTION_TABLE = _action_table(ACTIONS)


def parse_direction(text: str, table: Mapping[str, int] = _ACTION_TABLE) -> int | None:
    """The direction index of one action string, or None.

    Matching ignores case, surrounding whitespace, repeated inner spaces and a trailing period.
    """
    if len(text) > _MAX_ACTION_CHARS:
        return None
    key = text.strip().lower()
    hit = table.get(key)
    if hit is None:
        key = " ".join(key.rstrip(".").split())
        hit = table.get(key)
    return hit


def resolve_symbols(symbols: str | Mapping[str, str]) -> dict[str, str]:
    """A full role -> symbol map from a set name or a mapping (checked: every role, distinct symbols)."""
    if isinstance(symbols, str):
        if symbols not in SYMBOL_SETS:
            raise ValueError(f"unknown symbol set {symbols!r}; choose from {sorted(SYMBOL_SETS)} or pass a mapping")
        return dict(SYMBOL_SETS[symbols])
    table = {str(k): str(v) for k, v in dict(symbols).items()}
    missing = [r for r in ROLES if r not in table]
    if missing:
        raise ValueError(f"symbols mapping lacks role(s) {missing}; roles are {list(ROLES)}")
    values = [table[r] for r in ROLES]
    if len(set(values)) != len(values) or any(not v or "\n" in v for v in values):
        raise ValueError("symbols must be distinct, non-empty and without newlines")
    return {r: table[r] for r in ROLES}


class SokobanEnv(TextEnv):
    """Push every box onto a target in a small walled room, observed as a text grid.

    ## Description
    The text Sokoban that RAGEN (Wang et al., 2025) and verl-agent (Feng et al., 2025) train LLM agents on:
    a ``dim_room`` grid (6x6 by default, wall border included) with ``num_boxes`` boxes. The player walks
    and pushes boxes (one at a time, never pulls). Levels come from our seeded reverse-play generator
    (see :mod:`agentgym.envs.sokoban.generator`, after gym-sokoban) and every level is checked by a BFS
    solver, so each is solvable and its move-optimal length is known.

    ## Action Space
    A string naming a direction: ``up``, ``down``, ``left``, ``right``. Accepted spellings (case and
    surrounding whitespace ignored, a trailing ``.`` allowed): the word (``Up``), its first letter (``u``),
    RAGEN's digits (``1`` up, ``2`` down, ``3`` left, ``4`` right) and the prefixes ``move``/``go``/``push``
    (``move up``). With ``max_actions_per_step > 1`` one step may carry several actions separated by
    ``||`` (RAGEN's multi-action turns, e.g. ``Right || Right || Up``); they run in order until the level
    is solved, and actions beyond the limit are dropped (``info["actions_dropped"]``), as RAGEN does.

    ## Observation Space
    The grid, one row per line, with the symbols of ``symbols`` (default ``ragen``: ``#`` wall, ``_`` floor,
    ``O`` target, ``X`` box, ``√`` box on target, ``P`` player, ``S`` player on target; see
    :data:`SYMBOL_SETS` for ``ragen_padded``, ``ragen_vocab`` and ERL's letters ``erl``). After an invalid
    action the grid is followed by one line saying what was wrong.

    ## Starting State
    ``reset(seed=s)`` generates level ``s``; ``reset(options={"task_id": "sokoban-6x6-b1-seed5"})`` replays
    the level of seed 5; ``reset(options={"level": GRID_TEXT})`` plays a given grid (in this env's symbols).
    Without a seed, a level seed is drawn from ``self.np_random``.

    ## Rewards
    As gym-sokoban and RAGEN: -0.1 per move (a move into a wall too), +1 for pushing a box onto a target,
    -1 for pushing one off, +10 when every box is on a target. An invalid action (unparseable) scores 0 and
    changes nothing; penalising it is a wrapper's job.

    ## Episode End
    Terminated when every box is on a target. Truncated by the registration's ``max_episode_steps``
    (RAGEN caps an episode at 10 actions). Boxes pushed into a dead corner do not end the episode.

    ## Information
    Every step: ``is_action_valid``, ``invalid_reason`` (when invalid), ``success`` (all boxes on
    targets), ``task_id`` (``sokoban-<H>x<W>-b<boxes>-seed<seed>``), ``admissible_actions`` (the four
    directions), ``optimal_length`` (fewest moves that solve the level from its start),
    ``boxes_on_target``, ``num_boxes``, ``action_is_effective`` (the player moved; RAGEN's key) and, with
    multi-action steps, ``actions_executed`` / ``actions_dropped``.

    ## Arguments
    - ``dim_room``: ``(height, width)`` including the border (default ``(6, 6)``).
    - ``num_boxes``: boxes and targets (default 1).
    - ``symbols``: a name in :data:`SYMBOL_SETS` or a mapping from each role in
      :data:`~agentgym.envs.sokoban.generator.ROLES` to its cell text.
    - ``open_room``: no interior walls (ERL's layouts are open rooms); default False (carved rooms).
    - ``max_actions_per_step``: actions one step may carry, ``||``-separated (default 1).
    - ``max_solution_length``: regenerate levels whose optimal solution is longer (None: keep all).
    - ``num_room_steps`` / ``num_reverse_steps``: generator walk lengths (see :func:`generate_level`).
    - ``render_mode``: None or ``"ansi"`` (returns the observation text).

    ## Registered Configurations
    - ``agentgym/Sokoban-v0``: 6x6, 1 box, 10 steps, levels solvable in <= 10 moves (RAGEN ``SimpleSokoban``).
    - ``agentgym/Sokoban8x8B2-v0``: 8x8, 2 boxes, 10 steps, levels solvable in <= 10 moves (RAGEN
      ``LargerSokoban``: 8x8, 2 boxes, ``max_actions_per_traj`` 10, shallow reverse search).
    - ``agentgym/SokobanLetters-v0``: ``Sokoban-v0`` (same levels per seed) in ERL's letters (``erl``).
      ERL's own task draws open rooms of side 6-8 solvable in <= 8 moves with an 8-move budget
      (``examples/erl_sokoban/prepare_sokoban_data.py``); ``gym.make("agentgym/SokobanLetters-v0",
      open_room=True, max_solution_length=8, max_episode_steps=8)`` is that setting at a fixed 6x6 size.

    ## Version History
    - v0: follows RAGEN's text Sokoban (symbols, rewards, 10-action budget) with our own generator; ERL's
      letter symbols as an option (Shi et al., 2026, microsoft/experiential_rl).
    """

    def __init__(
        self,
        dim_room: tuple[int, int] = (6, 6),
        num_boxes: int = 1,
        symbols: str | Mapping[str, str] = "ragen",
        max_actions_per_step: int = 1,
        max_solution_length: int | None = None,
        open_room: bool = False,
        num_room_steps: int | None = None,
        num_reverse_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        self.dim_room = (int(dim_room[0]), int(dim_room[1]))
        self.num_boxes = int(num_boxes)
        if self.dim_room[0] < 4 or self.dim_room[1] < 4:
            raise ValueError(f"dim_room must be at least (4, 4) including the wall border, got {dim_room}")
        if self.num_boxes < 1 or self.num_boxes + 2 > (self.dim_room[0] - 2) * (self.dim_room[1] - 2):
            raise ValueError(f"num_boxes={num_boxes} does not fit a {self.dim_room} room")
        if int(max_actions_per_step) < 1:
            raise ValueError(f"max_actions_per_step must be >= 1, got {max_actions_per_step}")
        self.symbols = resolve_symbols(symbols)
        self.max_actions_per_step = int(max_actions_per_step)
        self.max_solution_length = max_solution_length
        self.open_room = bool(open_room)
        self.num_room_steps = num_room_steps
        self.num_reverse_steps = num_reverse_steps
        extra = "".join(self.symbols.values())
        if not set(extra) <= CHARSET:
            self.observation_space = text_space(charset=CHARSET | set(extra))
        self._task_prefix = f"sokoban-{self.dim_room[0]}x{self.dim_room[1]}-b{self.num_boxes}-seed"
        self._level: Level | None = None
        self._done = False

    # -- reset ----------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "level" in options:
            level = level_from_text(str(options["level"]), self.symbols)
            digest = hashlib.sha1(str(options["level"]).strip().encode()).hexdigest()[:12]
            task_id = f"sokoban-custom-{digest}"
        else:
            if "task_id" in options:
                level_seed = self._seed_of_task(str(options["task_id"]))
                rng = np.random.default_rng(level_seed)
            elif seed is not None:
                # self.np_random was just seeded with `seed`: the same stream as np.random.default_rng(seed)
                level_seed, rng = int(seed), self.np_random
            else:
                level_seed = int(self.np_random.integers(0, 2**31 - 1))
                rng = np.random.default_rng(level_seed)
            level = generate_level(
                rng,
                self.dim_room,
                self.num_boxes,
                num_room_steps=self.num_room_steps,
                num_reverse_steps=self.num_reverse_steps,
                max_solution_length=self.max_solution_length,
                open_room=self.open_room,
            )
            task_id = f"{self._task_prefix}{level_seed}"
        self._start(level, task_id)
        return self._observation, self._info()

    def _seed_of_task(self, task_id: str) -> int:
        m = re.fullmatch(re.escape(self._task_prefix) + r"(\d+)", task_id)
        if m is None:
            raise ValueError(f"task_id {task_id!r} is not a task of this env; expected {self._task_prefix}<seed>")
        return int(m.group(1))

    def _start(self, level: Level, task_id: str) -> None:
        self._level = level
        self.task_id = task_id
        h, w = level.height, level.width
        self._width = w
        self._offsets = offsets(w)
        self._walls = level.walls
        self._targets = frozenset(level.targets)
        self._boxes = set(level.boxes)
        self._player = level.player
        self._on_target = len(self._boxes & self._targets)
        self._done = self._on_target == len(self._boxes)
        self._optimal_length = level.optimal_length
        self._plan: list[int] = list(level.solution)
        self._plan_key = self._state_key()
        # One list of cell symbols with the newlines in place: the observation is then a single "".join, and a
        # move rewrites at most three entries.
        self._cell_index = [i + i // w for i in range(h * w)]
        self._cells = []
        for r in range(h):
            if r:
                self._cells.append("\n")
            self._cells.extend(self._symbol_at(r * w + c) for c in range(w))
        self._observation = "".join(self._cells)
        self._last_observation = self._observation

    def _symbol_at(self, i: int) -> str:
        s = self.symbols
        if self._walls[i]:
            return s["wall"]
        if i == self._player:
            return s["player_on_target"] if i in self._targets else s["player"]
        if i in self._boxes:
            return s["box_on_target"] if i in self._targets else s["box"]
        return s["target"] if i in self._targets else s["floor"]

    def _state_key(self) -> tuple[int, tuple[int, ...]]:
        return self._player, tuple(sorted(self._boxes))

    def _info(self, **extra: Any) -> dict[str, Any]:
        return self.make_info(
            task_id=self.task_id,
            success=self._on_target == len(self._boxes),
            admissible_actions=list(ACTIONS),
            optimal_length=self._optimal_length,
            boxes_on_target=self._on_target,
            num_boxes=len(self._boxes),
            **extra,
        )

    # -- step -----------------------------------------------------------------------------------------
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:  # type: ignore[override]
        if self._level is None:
            raise ResetNeeded("call reset() before step()")
        text = normalize_action(action)
        if (too_long := action_length_error(text)) is not None:
            return self._invalid(text, too_long)
        if self._done:
            return self._invalid(text, "the episode is over; call reset()")
        if self.max_actions_per_step == 1:
            d = parse_direction(text)
            if d is None:
                if "||" in text and len(text) <= _MAX_ACTION_CHARS * 4:
                    return self._invalid(text, "one action per step (this env has max_actions_per_step=1)")
                return self._invalid(text, "not a move; use up, down, left or right")
            reward, moved = self._move(d)
            self._observation = obs = "".join(self._cells)
            self._last_observation = obs
            return obs, reward, self._done, False, self._info(action_is_effective=moved)
        return self._step_many(text)

    def _step_many(self, text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        parts = text.split("||", self.max_actions_per_step) if len(text) <= 64 * _MAX_ACTION_CHARS else [text]
        dropped = 0
        if len(parts) > self.max_actions_per_step:
            dropped = parts[-1].count("||") + 1
            parts = parts[: self.max_actions_per_step]
        dirs = [parse_direction(p) for p in parts]
        if not parts or any(d is None for d in dirs):
            bad = next((p for p, d in zip(parts, dirs) if d is None), text)
            return self._invalid(
                text, f"{ascii(bad.strip()[:40])} is not a move; use up, down, left or right, '||'-separated"
            )
        total, moved_any, executed = 0.0, False, 0
        for d in dirs:
            reward, moved = self._move(d)  # type: ignore[arg-type]
            total += reward
            moved_any |= moved
            executed += 1
            if self._done:
                break
        self._observation = obs = "".join(self._cells)
        self._last_observation = obs
        info = self._info(action_is_effective=moved_any, actions_executed=executed, actions_dropped=dropped)
        return obs, total, self._done, False, info

    def _move(self, d: int) -> tuple[float, bool]:
        """Apply one move; return (reward, player moved). Updates the few grid cells that change."""
        o = self._offsets[d]
        p = self._player
        q = p + o
        reward = -0.1
        if self._walls[q]:
            return reward, False
        boxes = self._boxes
        cells, ci = self._cells, self._cell_index
        if q in boxes:
            b2 = q + o
            if self._walls[b2] or b2 in boxes:
                return reward, False
            boxes.remove(q)
            boxes.add(b2)
            targets = self._targets
            if q in targets:
                self._on_target -= 1
                reward -= 1.0
            if b2 in targets:
                self._on_target += 1
                reward += 1.0
            cells[ci[b2]] = self.symbols["box_on_target" if b2 in targets else "box"]
            if self._on_target == len(boxes):
                reward += 10.0
                self._done = True
        self._player = q
        cells[ci[p]] = self._symbol_at(p)
        cells[ci[q]] = self._symbol_at(q)
        return reward, True

    def _invalid(self, text: str, reason: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info = self._info(is_action_valid=False, invalid_reason=reason, action_is_effective=False)
        return self.invalid_step(self._observation, text, reason, terminated=self._done, info=info)

    # -- expert ---------------------------------------------------------------------------------------
    def expert_action(self) -> str:
        """The next move of a move-optimal plan from the current state (BFS; cached while followed)."""
        if self._level is None:
            raise ResetNeeded("call reset() before expert_action()")
        key = self._state_key()
        if key != self._plan_key or not self._plan:
            plan = solve(self._walls, self._width, self._targets, self._boxes, self._player)
            if not plan:  # solved already, or a box stuck for good: any move is as good as another
                return ACTIONS[0]
            self._plan, self._plan_key = plan, key
        d = self._plan.pop(0)
        self._plan_key = self._after(key, d)
        return ACTIONS[d]

    def _after(self, key: tuple[int, tuple[int, ...]], d: int) -> tuple[int, tuple[int, ...]]:
        p, boxes = key
        o = self._offsets[d]
        q = p + o
        if self._walls[q]:
            return key
        if q in boxes:
            if self._walls[q + o] or q + o in boxes:
                return key
            boxes = tuple(sorted(q + o if b == q else b for b in boxes))
        return q, boxes

    @property
    def level(self) -> Level | None:
        """The level being played (its start state and optimal solution)."""
        return self._level
