"""TRL's GRPOTrainer drives our envs through ``environment_factory``; the rewards it saw are the envs' returns.

The tiny random model is first taught (a few dozen teacher-forced steps) to answer with a ``move`` tool call in
Qwen2.5's format, so the rollouts really call the tools and step the envs; each episode a rollout played is then
replayed through plain ``gym.make`` from its seed and actions, and the rewards TRL logged must equal those returns.
"""

from __future__ import annotations

import json
import os

import gymnasium as gym
import pytest

pytest.importorskip("trl", reason="the trl extra is not installed (pip install 'agentgym[trl]')")
pytest.importorskip("datasets", reason="the trl extra is not installed (pip install 'agentgym[trl]')")

import agentgym  # noqa: E402, F401
from agentgym.integrations.tools import openai_tools  # noqa: E402
from agentgym.integrations.trl import environment_factory, task_dataset  # noqa: E402

ENV_IDS = ["agentgym/Sokoban-v0", "agentgym/FrozenLake-v0"]
TOOL_CALLS = [
    "<tool_call>\n" + json.dumps({"name": "move", "arguments": {"direction": d}}) + "\n</tool_call><|im_end|>"
    for d in ("up", "down", "left", "right")
]


def test_tool_schemas_are_what_transformers_reads_from_the_methods():
    from transformers.utils import get_json_schema

    for env_id in ("agentgym/Sokoban-v0", "agentgym/WebShop-v0", "agentgym/HotpotQA-v0", "agentgym/ALFWorld-v0"):
        cls = environment_factory(env_id)
        ours = {s["function"]["name"]: s["function"] for s in openai_tools(env_id)}
        for name, ref in ours.items():
            theirs = get_json_schema(getattr(cls, name))["function"]
            assert theirs["name"] == ref["name"] and theirs["description"] == ref["description"]
            assert theirs["parameters"] == ref["parameters"], name


def test_task_dataset_rows_reset_the_env_they_name():
    rows = task_dataset("agentgym/WebShop-v0", options=[{"split": "test", "index": i} for i in range(3)])
    assert rows.column_names == ["prompt", "seed", "options"] and len(rows) == 3
    assert json.loads(rows[2]["options"]) == {"split": "test", "index": 2}
    cls = environment_factory("agentgym/Sokoban-v0")
    env = cls()
    row = task_dataset("agentgym/Sokoban-v0", seeds=[7])[0]
    obs = env.reset(**row)
    assert obs == gym.make("agentgym/Sokoban-v0").reset(seed=7)[0]
    with pytest.raises(ValueError, match="needs seeds"):
        task_dataset("agentgym/Sokoban-v0")


@pytest.fixture(scope="module")
def tiny_tool_caller():
    """The tiny random Qwen2 model with Qwen2.5's tool template, taught to emit ``move`` tool calls (~30 s)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentgym.models.tiny import make_tiny_model, teach

    model, tok = make_tiny_model(arch="qwen2", seed=0)
    tok.chat_template = qwen2_5_chat_template
    pairs = []
    for env_id, seed in [(e, s) for e in ENV_IDS for s in range(4)]:
        env = environment_factory(env_id)()
        row = task_dataset(env_id, seeds=[seed])[0]
        prompt = row["prompt"]
        prompt[-1]["content"] += env.reset(**row)
        # the prompt as TRL renders it: the tools are the env's bound methods
        prefix = tok.apply_chat_template(prompt, tools=[env.move], add_generation_prompt=True, tokenize=False)
        pairs.append((prefix, TOOL_CALLS[seed % 4]))
    teach(model, tok, pairs, epochs=40, lr=3e-3)
    return model, tok


@pytest.mark.timeout(900)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_grpo_trainer_rewards_are_the_env_returns(tmp_path, env_id, tiny_tool_caller):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOConfig, GRPOTrainer

    played: list[tuple[int, list[str], float]] = []
    base = environment_factory(env_id)

    class Recorded(base):  # records what each rollout played, as TRL reads its reward
        def get_reward(self) -> float:
            reward = super().get_reward()
            played.append((self._tool_env.seed, list(self._tool_env.actions), reward))
            return reward

    Recorded.__name__ = base.__name__
    model, tokenizer = tiny_tool_caller
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=96,
        max_tool_calling_iterations=3,
        learning_rate=1e-4,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=task_dataset(env_id, seeds=range(8)),
        environment_factory=Recorded,
    )
    trainer.train()

    assert len(played) == 8  # 2 steps x 4 rollouts
    assert sum(len(actions) for _, actions, _ in played) >= 4, "the tiny model should have called the tools"
    for seed, actions, reward in played:
        env = gym.make(env_id)
        env.reset(seed=seed)
        ret = 0.0
        for action in actions:
            ret += float(env.step(action)[1])
        assert reward == pytest.approx(ret), (seed, actions)
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2
    for step, h in enumerate(logged):
        returns = [r for _, _, r in played[4 * step : 4 * step + 4]]
        assert h["reward"] == pytest.approx(sum(returns) / 4, abs=1e-6)
