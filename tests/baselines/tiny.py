"""Settings of a one-iteration tiny-model run on ``agentgym/EchoBandit-v0`` that the baselines' unit tests share."""

from __future__ import annotations


def tiny_echo(tmp_path, exp_name: str, **kw) -> dict:
    """Args fields for a tiny random model, 2 tasks x 2, one turn of 4 tokens, one iteration, nothing saved or
    plotted, no KL or entropy term; ``kw`` adds or replaces fields."""
    settings = dict(
        model="tiny",
        env_id="agentgym/EchoBandit-v0",
        num_tasks=2,
        group_size=2,
        max_turns=1,
        max_new_tokens=4,
        total_iterations=1,
        beta=0.0,
        entropy_coef=0.0,
        progress=False,
        plot=False,
        save_every=0,
        output_dir=str(tmp_path),
        exp_name=exp_name,
    )
    return {**settings, **kw}
