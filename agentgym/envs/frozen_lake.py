"""Text FrozenLake as RAGEN and ERL use it: a fresh random map per seeded reset, slippery ice."""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import numpy as np
from gymnasium.error import ResetNeeded

from agentgym.core import TextEnv, action_length_error, normalize_action

#: Canonical action names in gymnasium's action order (0 left, 1 down, 2 right, 3 up); RAGEN numbers
#: them 1-4 in the same order (``ragen/env/frozen_lake/config.py``).
ACTIONS: tuple[str, ...] = ("left", "down", "right", "up")
_MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))
_MAX_ACTION_CHARS = 64

#: RAGEN's grid lookup (``ragen/env/frozen_lake/config.py``): player, frozen, hole, goal, player in hole,
#: player on goal.
SYMBOLS: dict[str, str] = {
    "player": "P",
    "frozen": "_",
    "hole": "O",
    "goal": "G",
    "player_in_hole": "X",
    "player_on_goal": "√",
}
#: Named symbol sets (role -> the text of one cell): ``ragen`` (default) and ERL's letters ``erl``
#: (``examples/erl_frozenlake/erl_frozenlake_agent.py``: A player, B goal, C hole, D frozen, X player in a
#: hole, √ player on the goal; each cell rendered ``" A \t"`` as ERL does).
SYMBOL_SETS: dict[str, dict[str, str]] = {
    "ragen": dict(SYMBOLS),
    "erl": {
        role: f" {sym} \t"
        for role, sym in {
            "player": "A",
            "frozen": "D",
            "hole": "C",
            "goal": "B",
            "player_in_hole": "X",
            "player_on_goal": "√",
        }.items()
    },
}


def _action_table() -> dict[str, int]:
    table: dict[str, int] = {}
    for i, name in enumerate(ACTIONS):
        for form in (name, name[0], str(i + 1), f"move {name}", f"go {name}"):
            table[form] = i
    return table


_ACTION_TABLE = _action_table()


def parse_action(text: str) -> int | None:
    """Gymnasium action index of an action string (case/whitespace/trailing period ignored), or None."""
    if len(text) > _MAX_ACTION_CHARS:
        return None
    key = text.strip().lower()
    hit = _ACTION_TABLE.get(key)
    if hit is None:
        hit = _ACTION_TABLE.get(" ".join(key.rstrip(".").split()))
    return hit


def generate_map(rng: np.random.Generator, size: int = 4, p_frozen: float = 0.8, max_tries: int = 10_000) -> list[str]:
    """A ``size`` x ``size`` map in gymnasium's letters (``S`` start, ``F`` frozen, ``H`` hole, ``G`` goal).

    Each tile is frozen with probability ``p_frozen``; start and goal are distinct random tiles (RAGEN
    draws them at random rather than in the corners); the whole map is redrawn until the goal can be
    reached from the start over frozen tiles.
    """
    if size < 2:
        raise ValueError(f"size must be >= 2, got {size}")
    if not 0.0 < p_frozen <= 1.0:
        raise ValueError(f"p_frozen must be in (0, 1], got {p_frozen}")
    n = size * size
    for _ in range(max_tries):
        frozen = rng.random(n) < p_frozen
        start, goal = (int(k) for k in rng.choice(n, size=2, replace=False))
        tiles = ["F" if f else "H" for f in frozen]
        tiles[start], tiles[goal] = "S", "G"
        if _reachable(tiles, size, start, goal):
            return ["".join(tiles[r * size : (r + 1) * size]) for r in range(size)]
    raise RuntimeError(f"no {size}x{size} map with a path after {max_tries} tries (p_frozen={p_frozen})")


def _reachable(tiles: list[str], size: int, start: int, goal: int) -> bool:
    seen, todo = {start}, [start]
    while todo:
        s = todo.pop()
        if s == goal:
            return True
        r, c = divmod(s, size)
        for dr, dc in _MOVES:
            r2, c2 = r + dr, c + dc
            if 0 <= r2 < size and 0 <= c2 < size:
                t = r2 * size + c2
                if t not in seen and tiles[t] != "H":
                    seen.add(t)
                    todo.append(t)
    return False


class FrozenLakeEnv(TextEnv):
    """Cross a frozen lake from start to goal without falling into a hole; the ice may be slippery.

    ## Description
    The text FrozenLake of RAGEN (Wang et al., 2025) and ERL (Shi et al., 2026): every seeded reset draws a
    new ``size`` x ``size`` map (4x4 by default) whose tiles are frozen with probability ``p_frozen`` (0.8),
    with start and goal at random distinct tiles and a path between them guaranteed. Dynamics are
    gymnasium's ``FrozenLake-v1``: on slippery ice the intended move happens with probability
    ``success_rate`` (1/3) and each perpendicular move with ``(1 - success_rate) / 2``; moving off the map
    leaves the player in place.

    ## Action Space
    A string: ``left``, ``down``, ``right``, ``up``. Accepted spellings (case, surrounding whitespace and a
    trailing ``.`` ignored): the word (``Left``), its first letter, RAGEN's digits (``1`` left, ``2`` down,
    ``3`` right, ``4`` up) and the prefixes ``move``/``go``.

    ## Observation Space
    The map, one row per line, in RAGEN's symbols: ``P`` player, ``_`` frozen (the start tile too), ``O``
    hole, ``G`` goal, ``X`` player in a hole, ``√`` player on the goal (``symbols="erl"``: ERL's letters, see
    :data:`SYMBOL_SETS`). After an invalid action the map is followed by one line saying what was wrong.

    ## Starting State
    ``reset(seed=s)`` draws map ``s`` (``task_id`` ``frozenlake-4x4-p0.8-seed<s>``) and then the slips from
    ``self.np_random``; ``options={"task_id": ...}`` without a seed is the same as ``reset(seed=s)``;
    ``options={"map": ["SFFF", "FHFH", ...]}`` plays a given map in gymnasium's letters.

    ## Rewards
    1 on reaching the goal, 0 otherwise (gymnasium ``FrozenLake-v1``, RAGEN). Invalid actions score 0.

    ## Episode End
    Terminated on reaching the goal or falling into a hole; truncated by ``max_episode_steps`` at
    registration (10 actions, as RAGEN's ``max_actions_per_traj``).

    ## Information
    Every step: ``is_action_valid``, ``invalid_reason`` (when invalid), ``success`` (on the goal),
    ``task_id``, ``admissible_actions`` (the four moves), ``optimal_success_prob`` (the best achievable
    probability of reaching the goal from the start within the step budget, by value iteration),
    ``action_is_effective`` (the player moved; RAGEN's key) and ``intended_action`` / ``executed_action``
    (which move the ice turned it into).

    ## Arguments
    - ``size``: map side (default 4). ``p_frozen``: probability a tile is frozen (default 0.8).
    - ``is_slippery``: slippery dynamics (default True). ``success_rate``: probability the intended move
      happens on slippery ice (default 1/3, as gymnasium).
    - ``horizon``: the step budget ``optimal_success_prob`` and the expert plan for; the registrations set
      it equal to ``max_episode_steps`` (an env cannot see its TimeLimit wrapper). Default 100.
    - ``symbols``: ``"ragen"`` (default) or ``"erl"``.
    - ``render_mode``: None or ``"ansi"``.

    ## Registered Configurations
    - ``agentgym/FrozenLake-v0``: 4x4, p_frozen 0.8, slippery (1/3), 10 steps.
    - ``agentgym/FrozenLakeNotSlippery-v0``: the same maps, deterministic moves.
    - ``agentgym/FrozenLakeLetters-v0``: ``FrozenLake-v0`` (same maps per seed) in ERL's letters.

    ## Version History
    - v0: follows RAGEN's FrozenLake (random map per seed, symbols, 10-action budget) with gymnasium's dynamics.
    """

    def __init__(
        self,
        size: int = 4,
        p_frozen: float = 0.8,
        is_slippery: bool = True,
        success_rate: float = 1.0 / 3.0,
        horizon: int | None = None,
        symbols: str = "ragen",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        if symbols not in SYMBOL_SETS:
            raise ValueError(f"unknown symbol set {symbols!r}; choose from {sorted(SYMBOL_SETS)}")
        self.symbols = SYMBOL_SETS[symbols]
        if int(size) < 2:
            raise ValueError(f"size must be >= 2, got {size}")
        if not 0.0 < float(p_frozen) <= 1.0:
            raise ValueError(f"p_frozen must be in (0, 1], got {p_frozen}")
        if not 0.0 <= float(success_rate) <= 1.0:
            raise ValueError(f"success_rate must be in [0, 1], got {success_rate}")
        self.size = int(size)
        self.p_frozen = float(p_frozen)
        self.is_slippery = bool(is_slippery)
        self.success_rate = float(success_rate) if self.is_slippery else 1.0
        if horizon is not None and int(horizon) < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.horizon = horizon
        self._task_prefix = f"frozenlake-{self.size}x{self.size}-p{self.p_frozen:g}-seed"
        self._tiles: list[str] | None = None

    # -- reset ----------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "map" in options:
            rows = [str(r) for r in options["map"]]
            tiles, size = self._check_map(rows)
            task_id = "frozenlake-custom-" + "/".join(rows)
        else:
            if "task_id" in options:
                m = re.fullmatch(re.escape(self._task_prefix) + r"(\d+)", str(options["task_id"]))
                if m is None:
                    raise ValueError(
                        f"task_id {options['task_id']!r} is not a task of this env ({self._task_prefix}<seed>)"
                    )
                map_seed = int(m.group(1))
                if seed is None:  # replaying a task is resetting with its seed: same map, same slips
                    super().reset(seed=map_seed)
                    rng = self.np_random
                else:
                    rng = np.random.default_rng(map_seed)
            elif seed is not None:
                map_seed, rng = int(seed), self.np_random
            else:
                map_seed = int(self.np_random.integers(0, 2**31 - 1))
                rng = np.random.default_rng(map_seed)
            # With a seed the map is drawn from self.np_random itself (a generator seeded with s gives the same
            # numbers as np.random.default_rng(s)), so the slips that follow come from later in the same stream
            # and never reuse the numbers that drew the map.
            rows = generate_map(rng, self.size, self.p_frozen)
            tiles, size = list("".join(rows)), self.size
            task_id = f"{self._task_prefix}{map_seed}"
        self.task_id = task_id
        self._n = size
        self._tiles = tiles
        self._pos = tiles.index("S")
        self._t = 0
        self._done = False
        self._budget = self._horizon()
        self._q = self._solve()
        self._optimal = float(self._q[self._budget][self._pos].max()) if self._budget > 0 else 0.0
        self._cells: list[str] = []
        for r in range(size):
            if r:
                self._cells.append("\n")
            self._cells.extend(self._symbol(r * size + c) for c in range(size))
        self._cell_index = [i + i // size for i in range(size * size)]
        self._observation = self._last_observation = "".join(self._cells)
        return self._observation, self._info()

    def _check_map(self, rows: list[str]) -> tuple[list[str], int]:
        size = len(rows)
        if size < 2 or any(len(r) != size for r in rows):
            raise ValueError("options['map'] must be a square list of strings of S/F/H/G")
        tiles = list("".join(rows))
        if set(tiles) - set("SFHG") or tiles.count("S") != 1 or tiles.count("G") < 1:
            raise ValueError("options['map'] needs one S, at least one G, and only S/F/H/G letters")
        return tiles, size

    def _horizon(self) -> int:
        return int(self.horizon) if self.horizon is not None else 100

    def _symbol(self, i: int) -> str:
        tile = self._tiles[i]  # type: ignore[index]
        if i == self._pos:
            return self.symbols["player_in_hole" if tile == "H" else "player_on_goal" if tile == "G" else "player"]
        return self.symbols["hole" if tile == "H" else "goal" if tile == "G" else "frozen"]

    # -- dynamics -------------------------------------------------------------------------------------
    def _next(self, s: int, a: int) -> int:
        r, c = divmod(s, self._n)
        dr, dc = _MOVES[a]
        r2, c2 = r + dr, c + dc
        if 0 <= r2 < self._n and 0 <= c2 < self._n:
            return r2 * self._n + c2
        return s

    def _outcomes(self, a: int) -> list[tuple[int, float]]:
        """(executed action, probability) for intended action ``a`` (gymnasium's order: a-1, a, a+1)."""
        if not self.is_slippery or self.success_rate >= 1.0:
            return [(a, 1.0)]
        side = (1.0 - self.success_rate) / 2.0
        return [((a - 1) % 4, side), (a, self.success_rate), ((a + 1) % 4, side)]

    def _solve(self) -> np.ndarray:
        """Finite-horizon value iteration: ``q[k][s, a]`` = best P(goal) from ``s`` with ``k`` moves left."""
        n = self._n * self._n
        tiles = self._tiles
        trans = np.zeros((4, n, n))  # trans[a, s, s2] = P(s2 | s, a) for non-terminal s; rows of H/G stay 0
        live = np.array([t not in "HG" for t in tiles])  # type: ignore[union-attr]
        for s in np.flatnonzero(live):
            for a in range(4):
                for b, p in self._outcomes(a):
                    trans[a, s, self._next(int(s), b)] += p
        # Value of arriving at a tile: 1 at the goal, 0 in a hole, else the best value with one move fewer.
        arrive = np.array([1.0 if t == "G" else 0.0 for t in tiles])  # type: ignore[union-attr]
        q = np.zeros((self._budget + 1, n, 4))
        for k in range(1, self._budget + 1):
            qk = (trans @ arrive).T  # (n, 4)
            q[k] = qk
            arrive = np.where(live, qk.max(axis=1), arrive)
        return q

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:  # type: ignore[override]
        if self._tiles is None:
            raise ResetNeeded("call reset() before step()")
        text = normalize_action(action)
        if (too_long := action_length_error(text)) is not None:
            return self._invalid(text, too_long)
        if self._done:
            return self._invalid(text, "the episode is over; call reset()")
        a = parse_action(text)
        if a is None:
            return self._invalid(text, "not a move; use left, down, right or up")
        executed = a
        if self.is_slippery and self.success_rate < 1.0:
            u = self.np_random.random()
            side = (1.0 - self.success_rate) / 2.0
            executed = (a - 1) % 4 if u < side else a if u < side + self.success_rate else (a + 1) % 4
        p = self._pos
        q = self._next(p, executed)
        self._pos = q
        self._t += 1
        tile = self._tiles[q]
        self._done = tile in "HG"
        if q != p:
            self._cells[self._cell_index[p]] = self._symbol(p)
            self._cells[self._cell_index[q]] = self._symbol(q)
        elif self._done:  # cannot happen (start is not terminal) but keep the grid honest
            self._cells[self._cell_index[q]] = self._symbol(q)
        self._observation = self._last_observation = obs = "".join(self._cells)
        info = self._info(action_is_effective=q != p, intended_action=ACTIONS[a], executed_action=ACTIONS[executed])
        return obs, 1.0 if tile == "G" else 0.0, self._done, False, info

    def _info(self, **extra: Any) -> dict[str, Any]:
        return self.make_info(
            task_id=self.task_id,
            success=self._tiles[self._pos] == "G",  # type: ignore[index]
            admissible_actions=list(ACTIONS),
            optimal_success_prob=self._optimal,
            **extra,
        )

    def _invalid(self, text: str, reason: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info = self._info(is_action_valid=False, invalid_reason=reason, action_is_effective=False)
        return self.invalid_step(self._observation, text, reason, terminated=self._done, info=info)

    # -- expert ---------------------------------------------------------------------------------------
    def expert_action(self) -> str:
        """Non-slippery: the next move of a shortest safe path. Slippery: the finite-horizon optimal action."""
        if self._tiles is None:
            raise ResetNeeded("call reset() before expert_action()")
        if not self.is_slippery or self.success_rate >= 1.0:
            step = self._shortest_path_move()
            if step is not None:
                return ACTIONS[step]
        left = max(1, min(self._budget - self._t, self._budget))
        qs = self._q[left][self._pos]
        return ACTIONS[int(np.argmax(qs))]

    def _shortest_path_move(self) -> int | None:
        n = self._n * self._n
        tiles = self._tiles
        goals = [i for i in range(n) if tiles[i] == "G"]  # type: ignore[index]
        dist = {g: 0 for g in goals}
        queue = deque(goals)
        while queue:  # BFS backwards from the goal over tiles that are not holes
            s = queue.popleft()
            for a in range(4):
                t = self._next(s, a)
                if t not in dist and tiles[t] != "H":  # type: ignore[index]
                    dist[t] = dist[s] + 1
                    queue.append(t)
        here = dist.get(self._pos)
        if here is None or here == 0:
            return None
        for a in range(4):
            t = self._next(self._pos, a)
            if dist.get(t, here) == here - 1 and tiles[t] != "H":  # type: ignore[index]
                return a
        return None
