"""Every ``register(...)`` call of agentgym, grouped by env family (DESIGN.md section 3).

Entry points are strings, so importing agentgym imports no env module and no heavy backend; the
module loads at ``gym.make``. Anything that can move a score bumps the ``-vN``; old versions stay.
"""

from __future__ import annotations

from gymnasium.envs.registration import register

from agentgym.data import register_family


# -- data families (`agentgym data prepare|download NAME`); each module is imported only when used -----------
def _alfworld_data():
    from agentgym.envs.alfworld import games

    return games


def _webshop_data():
    from agentgym.envs.webshop import catalog

    return catalog


def _hotpotqa_data():
    from agentgym.envs.hotpotqa import data

    return data


register_family("alfworld", _alfworld_data)
register_family("webshop", _webshop_data)
register_family("hotpotqa", _hotpotqa_data)

# -- Sokoban (RAGEN / verl-agent text Sokoban) -----------------------------------------------------
# Step limits follow RAGEN's config/envs.yaml: SimpleSokoban (6x6, 1 box) and LargerSokoban (8x8, 2 boxes)
# both have max_actions_per_traj 10. Levels are kept only when solvable within that budget, so a perfect
# agent scores 1.0 (max_solution_length; RAGEN's LargerSokoban keeps levels short with search_depth 10).
register(
    id="agentgym/Sokoban-v0",
    entry_point="agentgym.envs.sokoban.env:SokobanEnv",
    max_episode_steps=10,
    kwargs={"dim_room": (6, 6), "num_boxes": 1, "max_solution_length": 10},
)
register(
    id="agentgym/Sokoban8x8B2-v0",
    entry_point="agentgym.envs.sokoban.env:SokobanEnv",
    max_episode_steps=10,
    kwargs={"dim_room": (8, 8), "num_boxes": 2, "max_solution_length": 10},
)
# Sokoban-v0's levels in ERL's letter symbols (microsoft/experiential_rl): the symbol-robustness twin.
register(
    id="agentgym/SokobanLetters-v0",
    entry_point="agentgym.envs.sokoban.env:SokobanEnv",
    max_episode_steps=10,
    kwargs={"dim_room": (6, 6), "num_boxes": 1, "max_solution_length": 10, "symbols": "erl"},
)

# -- FrozenLake (RAGEN / ERL text FrozenLake) ------------------------------------------------------
# RAGEN: 4x4, p 0.8, slippery, max_actions_per_traj 10. ``horizon`` is the budget the env's value iteration
# (info["optimal_success_prob"], the expert) plans for; keep it equal to max_episode_steps.
register(
    id="agentgym/FrozenLake-v0",
    entry_point="agentgym.envs.frozen_lake:FrozenLakeEnv",
    max_episode_steps=10,
    kwargs={"size": 4, "p_frozen": 0.8, "is_slippery": True, "horizon": 10},
)
register(
    id="agentgym/FrozenLakeNotSlippery-v0",
    entry_point="agentgym.envs.frozen_lake:FrozenLakeEnv",
    max_episode_steps=10,
    kwargs={"size": 4, "p_frozen": 0.8, "is_slippery": False, "horizon": 10},
)
# FrozenLake-v0's maps in ERL's letter symbols (microsoft/experiential_rl examples/erl_frozenlake).
register(
    id="agentgym/FrozenLakeLetters-v0",
    entry_point="agentgym.envs.frozen_lake:FrozenLakeEnv",
    max_episode_steps=10,
    kwargs={"size": 4, "p_frozen": 0.8, "is_slippery": True, "horizon": 10, "symbols": "erl"},
)

# -- ALFWorld (alfworld 0.4.2 + textworld engine) --------------------------------------------------
# 50 steps is the limit of ALFWorld's papers (ReAct, SEED, GiGPO, SAPO). ALFWorld-v0 shows alfworld 0.4.x
# wording (`move X to Y`); ALFWorldPut-v0 the 0.3.x wording (`put X in/on Y`) of results published before
# late 2024. Both accept either spelling.
register(
    id="agentgym/ALFWorld-v0",
    entry_point="agentgym.envs.alfworld.env:ALFWorldEnv",
    max_episode_steps=50,
    kwargs={"split": "train", "wording": "move"},
)
register(
    id="agentgym/ALFWorldPut-v0",
    entry_point="agentgym.envs.alfworld.env:ALFWorldEnv",
    max_episode_steps=50,
    kwargs={"split": "train", "wording": "put"},
)

# -- WebShop (our engine over the original data and reward) ---------------------------------------
# 1k catalogue, 6,910 synthetic goals (test = goals 0-499), 15 steps as verl-agent.
register(
    id="agentgym/WebShop-v0",
    entry_point="agentgym.envs.webshop.env:WebShopEnv",
    max_episode_steps=15,
)
# The same shop served by Flask and driven through headless Chromium (extra "web": selenium).
register(
    id="agentgym/WebShopBrowser-v0",
    entry_point="agentgym.envs.webshop.browser:WebShopBrowserEnv",
    max_episode_steps=15,
)

# -- HotpotQA (ReAct-style search / lookup / finish) -----------------------------------------------
register(
    id="agentgym/HotpotQA-v0",
    entry_point="agentgym.envs.hotpotqa.env:HotpotQAEnv",
    max_episode_steps=7,
    kwargs={"setting": "distractor"},
)
# ReAct (ysymyth/ReAct hotpotqa.ipynb) runs steps 1-7; the open setting searches every paragraph of the file.
register(
    id="agentgym/HotpotQAOpen-v0",
    entry_point="agentgym.envs.hotpotqa.env:HotpotQAEnv",
    max_episode_steps=7,
    kwargs={"setting": "open"},
)
# ERL (microsoft/experiential_rl examples/erl_hotpot): 5 turns, retriever top 5, answer in \boxed{}.
register(
    id="agentgym/HotpotQAERL-v0",
    entry_point="agentgym.envs.hotpotqa.env:HotpotQAEnv",
    max_episode_steps=5,
    kwargs={"setting": "open", "top_k": 5, "answer_format": "boxed"},
)

# -- EchoBandit (test env of the LLM agents stack; owned by AGENTS) ----------------------------------
# A "say the word" task: tests of rollout/agents/baselines run on it in milliseconds. Not a benchmark.
register(
    id="agentgym/EchoBandit-v0",
    entry_point="agentgym.envs.echo:EchoBanditEnv",
    max_episode_steps=3,
)
# The same with a cue instead of the word: only the feedback after a miss names the answer (ERL's toy).
register(
    id="agentgym/EchoBanditHidden-v0",
    entry_point="agentgym.envs.echo:EchoBanditEnv",
    max_episode_steps=3,
    kwargs={"hidden": True},
)
