"""SEED's analyser prompt, lesson parsing (retry/fallback) and the lesson-writer hook."""

from __future__ import annotations

import json

import pytest

from agentgym.episodes import Episode, JsonlWriter, Step, read_episodes
from agentgym.prompts.lesson import LessonParseError, build_lesson_messages, parse_lesson
from agentgym.rl.hooks import LessonWriter
from tests.baselines.test_configs import config_args, folder_configs
from tests.baselines.tiny import tiny_echo


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny-model forward/backward runs >10x faster on one thread when the CPU is shared (measured)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def make_episode(success: bool, n: int = 2) -> Episode:
    steps = [
        Step(
            action="down",
            observation=f"obs {i}",
            reward=0.0,
            terminated=False,
            truncated=False,
            info={"is_action_valid": True, "success": False},
        )
        for i in range(n - 1)
    ]
    steps.append(
        Step(
            action="right",
            observation="end",
            reward=1.0 if success else 0.0,
            terminated=True,
            truncated=False,
            info={"is_action_valid": True, "success": success},
        )
    )
    return Episode(env_id="agentgym/FrozenLakeNotSlippery-v0", seed=3, reset_observation="P _\n_ G", steps=steps)


def test_analyser_prompt_asks_the_papers_fields_workflow_on_success_and_mistake_on_failure():
    ok = build_lesson_messages(make_episode(True))[-1]["content"]
    bad = build_lesson_messages(make_episode(False))[-1]["content"]
    for text in (ok, bad):  # the paper's lesson JSON: episode_summary + episode_skill, nothing else
        assert '"episode_summary"' in text and '"episode_skill"' in text
        assert '"lesson"' not in text and '"workflow"' not in text and '"mistake"' not in text
    assert "workflow" in ok and "mistake" in bad and "warning signs" in bad
    assert "JSON only" in ok and "P _" in ok and "'right'" in ok


@pytest.mark.parametrize(
    "reply, lesson",
    [
        ('{"episode_summary": "went down then right", "episode_skill": "Go down first."}', "Go down first."),
        ('Sure!\n```json\n{"episode_summary": "m", "episode_skill": "Check holes."}\n```', "Check holes."),
        ('<think>{"episode_skill": "not this"}</think>{"episode_skill": "this one"} trailing', "this one"),
        ('{"episode_skill": ["down first", "then right"]}', "down first; then right"),
        ('{"broken": 1 {"episode_skill": "second object"}', "second object"),
    ],
)
def test_parse_lesson_accepts_json_in_noise(reply, lesson):
    assert parse_lesson(reply).lesson == lesson


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "no json here",
        '{"episode_skill": ""}',
        '{"episode_summary": "only a summary"}',
        '{"lesson": "the old field"}',
        "{'episode_skill': 'x'}",
        "[1, 2]",
    ],
)
def test_parse_lesson_rejects_replies_without_a_lesson(reply):
    with pytest.raises(LessonParseError):
        parse_lesson(reply)


def test_parse_lesson_cuts_long_lessons():
    out = parse_lesson(json.dumps({"episode_skill": " ".join(["word"] * 500)}), max_words=10)
    assert len(out.lesson.split()) == 11 and out.lesson.endswith("...")


def test_lesson_writer_retries_falls_back_counts_and_logs(tmp_path):
    calls = []
    script = {  # episode index -> replies on successive attempts
        0: ['{"episode_skill": "good one"}'],
        1: ["garbage", '{"episode_skill": "second try"}'],
        2: ["garbage", "still garbage", "{}"],
    }

    def analyse(chats):
        calls.append(len(chats))
        out = []
        for chat in chats:
            i = int(chat[-1]["content"].split("seed-ep-")[1][0])
            out.append(script[i].pop(0))
        return out

    path = tmp_path / "eps.jsonl"
    writer = JsonlWriter(path)
    hook = LessonWriter(analyse, max_retries=2, then=[writer])
    for i in range(3):
        ep = make_episode(i == 0)
        ep.reset_observation = f"seed-ep-{i}"
        hook.on_reset(ep)
        hook.on_episode_end(ep)
    assert path.read_text() == ""  # nothing written before the lessons exist
    done = hook.flush()
    writer.close()
    assert calls == [3, 2, 1]  # batched: all, then the two failures, then the last one
    assert [e.extras["lesson"] for e in done] == ["good one", "second try", None]
    assert done[2].extras["seed"]["attempts"] == 3 and done[2].extras["seed"]["error"]
    m = hook.metrics()
    assert m["seed/lesson_parse_failures"] == 4.0 and m["seed/lesson_fallbacks"] == 1.0
    assert m["seed/lesson_rate"] == pytest.approx(2 / 3)
    logged = read_episodes(path)
    assert [e.extras["lesson"] for e in logged] == ["good one", "second try", None]
    assert hook.metrics()["seed/lesson_parse_failures"] == 0.0  # reset after reading


# -- gate and distillation loss --------------------------------------------------------------------------
import math  # noqa: E402

import torch  # noqa: E402

from baselines.seed import Args, SeedTrainer, opd_loss, seed_gate  # noqa: E402


def sig(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_gate_is_sigmoid_of_beta_times_the_detached_gap():
    teacher = torch.tensor([[-1.0, -2.0], [-0.5, -3.0]])
    student = torch.tensor([[-1.5, -1.0], [-0.5, -2.0]], requires_grad=True)
    g = seed_gate(teacher, student, gate_beta=5.0)
    expected = [[sig(2.5), sig(-5.0)], [sig(0.0), sig(-5.0)]]
    assert torch.allclose(g, torch.tensor(expected))
    assert not g.requires_grad  # the gate carries no gradient


def test_opd_loss_value_and_gradient_reach_the_student_only():
    teacher = torch.tensor([[-1.0, -2.0, -7.0], [-0.5, -3.0, -1.0]], requires_grad=True)
    student = torch.tensor([[-1.5, -1.0, -1.0], [-0.5, -2.0, -1.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    loss, stats = opd_loss(student, teacher, mask, gate_beta=5.0)
    g = [[sig(2.5), sig(-5.0)], [sig(0.0), sig(-5.0)]]
    gap = [[0.5, -1.0], [0.0, -1.0]]  # sg[l_skill] - l_theta
    value = sum(g[i][j] * gap[i][j] for i in range(2) for j in range(2)) / 4
    assert loss.item() == pytest.approx(value, rel=1e-5)
    assert stats["seed/gate_mean"].item() == pytest.approx(sum(sum(r) for r in g) / 4, rel=1e-5)
    loss.backward()
    expected = -torch.tensor([[g[0][0], g[0][1], 0.0], [g[1][0], g[1][1], 0.0]]) / 4
    assert torch.allclose(student.grad, expected, atol=1e-6)
    assert teacher.grad is None  # the teacher is a fixed target


def test_no_gate_ablation_weights_every_token_equally():
    teacher = torch.tensor([[-1.0, -2.0]])
    student = torch.tensor([[-1.5, -1.0]], requires_grad=True)
    loss, _ = opd_loss(student, teacher, torch.ones(1, 2), use_gate=False)
    assert loss.item() == pytest.approx((0.5 - 1.0) / 2)
    loss.backward()
    assert torch.allclose(student.grad, torch.tensor([[-0.5, -0.5]]))


# -- teacher / student branches --------------------------------------------------------------------------
def make_trainer(tmp_path, **kw):
    lessons = {"no_sft": True, "lesson_max_new_tokens": 8, "lesson_max_prompt_tokens": 128, "max_prompt_tokens": 256}
    return SeedTrainer(Args(**tiny_echo(tmp_path, "seed", **{**lessons, **kw})))


def scripted_analyser(chats):
    return ['{"episode_summary": "m", "episode_skill": "LESSON-TEXT say the target"}' for _ in chats]


def test_teacher_sees_the_lesson_after_the_task_and_the_students_tokens(tmp_path):
    tr = make_trainer(tmp_path, prompt_style=None)  # the verl-agent template: "Your task is to: ..."
    tr.lesson_writer.analyse = scripted_analyser
    rb = tr.play(tr.next_tasks(), group_size=2, seed=0)
    assert all(ep.extras["lesson"] == "LESSON-TEXT say the target" for ep in rb.episodes)
    batch = tr.make_batch(rb)
    tr.score(batch)
    tr.score_teacher(rb, batch)
    prompts, has = tr.lesson_prompts(rb)
    tok = tr.tokenizer
    for turn, tp in zip(rb.turns, prompts):
        teacher_text, student_text = tok.decode(tp), tok.decode(turn.prompt_ids)
        assert "LESSON-TEXT" not in student_text
        task, heading, lesson = (
            teacher_text.index(s) for s in ("Your task is to:", tr.template.lesson_heading, "LESSON-TEXT")
        )
        assert task < heading < lesson < teacher_text.index("Your current observation is:")
    assert has == [1.0] * len(rb.turns)
    # same sampled tokens in both branches: identical response columns, different log-probs
    assert batch["teacher_per_token_logps"].shape == batch["old_per_token_logps"].shape
    m = batch["completion_mask"].bool()
    assert not torch.allclose(batch["teacher_per_token_logps"][m], batch["old_per_token_logps"][m])


def test_episodes_without_a_lesson_are_masked_out_and_logged(tmp_path):
    tr = make_trainer(tmp_path, prompt_style="bare")
    tr.lesson_writer.analyse = lambda chats: ["not json"] * len(chats)
    rb = tr.play(tr.next_tasks(), group_size=2, seed=0)
    batch = tr.make_batch(rb)
    tr.score(batch)
    tr.score_teacher(rb, batch)
    assert batch["has_lesson"].sum() == 0
    assert torch.equal(batch["teacher_per_token_logps"], batch["old_per_token_logps"])  # teacher == student prompt
    metrics = tr.lesson_writer.metrics()
    assert metrics["seed/lesson_parse_failures"] == 4 * 3  # 4 episodes x (1 + 2 retries)
    tr._writer.close()
    from agentgym.episodes import read_episodes

    logged = read_episodes(tmp_path / "seed" / "episodes.jsonl")
    assert len(logged) == 4 and all(e.extras["seed"]["error"] for e in logged)


def test_seed_smoke_sft_then_rl_with_the_tiny_model(tmp_path):
    from agentgym.rl.testing import param_vector

    words = ["apple", "river", "stone", "cloud"]
    tr = make_trainer(
        tmp_path,
        prompt_style="bare",
        restrict_vocab=words,
        no_sft=False,
        sft_tasks=2,
        sft_group_size=2,
        total_iterations=2,
        learning_rate=1e-2,
        lambda_opd=1.0,
    )
    real = tr.lesson_writer.analyse
    replies = iter(range(10_000))

    def half_scripted(chats):  # the tiny model's own replies (never JSON) for half the calls
        return real(chats) if next(replies) % 2 else scripted_analyser(chats)

    tr.lesson_writer.analyse = half_scripted
    before = param_vector(tr.model)
    metrics = tr.fit()
    assert not torch.equal(before, param_vector(tr.model))
    assert all(math.isfinite(v) for v in metrics.values())
    assert tr.sft_done and metrics["losses/opd_loss"] != 0.0
    assert "seed/lesson_parse_failures" in metrics and tr.logger.history[0]["sft/rows"] > 0
    # the JSON targets are mostly outside restrict_vocab: those ids are not counted (their log-prob is the -1e4
    # floor), so the logged SFT loss is the NLL of what the policy can emit (the vocabulary has ~1k ids: < 10)
    assert 0.0 < tr.logger.history[0]["losses/sft_loss"] < 10.0


def test_train_fraction_draws_from_a_fixed_subset(tmp_path):
    tr = make_trainer(tmp_path, train_fraction=0.6, num_train_tasks=10, num_tasks=50, task_split="train")
    idx = {s.options["index"] for s in tr.next_tasks()}
    assert len(tr.task_subset) == 6 and idx <= set(tr.task_subset)
    with pytest.raises(ValueError, match="num_train_tasks"):
        make_trainer(tmp_path / "b", train_fraction=0.6)


@pytest.mark.parametrize("path", folder_configs("seed"), ids=lambda p: p.stem)
def test_seed_configs_load(path):
    args = config_args(path)
    assert args.exp_name.startswith(path.stem.split("_")[0])
    if path.name.startswith("seed_") and "alfworld" in path.name:
        assert (args.lambda_opd, args.gate_beta, args.beta, args.group_size, args.learning_rate) == (
            0.01,
            5.0,
            0.01,
            8,
            1e-6,
        )
        assert args.total_iterations == 150 and args.invalid_penalty == 0.1


@pytest.mark.slow
def test_seed_learns_and_compares_with_grpo_at_equal_episodes(tmp_path):
    """SEED (SFT stage + GRPO + gated lesson distillation) vs GRPO on EchoBandit, same number of env episodes."""
    from tests.baselines import curves

    cfg = "baselines/configs/seed/seed_echo_tiny.yaml"
    from tests.baselines.learning import oracle_analyser

    seed = curves.run("seed", cfg, tmp_path, analyser=oracle_analyser)
    per_it = 8 * 8
    sft_episodes = 4 * 4
    x_seed = [sft_episodes + per_it * (i + 1) for i in range(len(seed))]
    grpo = curves.run("grpo", cfg, tmp_path, total_iterations=len(seed) + math.ceil(sft_episodes / per_it))
    s_seed = [h["charts/success_rate"] for h in seed]
    s_grpo = [h["charts/success_rate"] for h in grpo]
    curves.save(
        "seed_vs_grpo_echo",
        {"SEED": (x_seed, s_seed), "GRPO": (curves.episodes_axis(grpo, per_it), s_grpo)},
        "EchoBandit, tiny model: SEED vs GRPO",
    )
    assert seed[0]["sft/rows"] > 0 and all(h["seed/lesson_rows"] > 0 for h in seed)
    first, last = sum(s_seed[:10]) / 10, sum(s_seed[-10:]) / 10
    assert last > first + 0.15, (first, last)


def test_sft_rows_teach_trajectory_to_lesson_and_action_rows_are_an_option(tmp_path):
    tr = make_trainer(tmp_path, prompt_style="bare")
    tr.lesson_writer.analyse = scripted_analyser
    rb = tr.play(tr.next_tasks(), group_size=2, seed=0)
    prompts, responses = tr.sft_rows(rb)
    assert len(prompts) == len(rb.episodes) == 4  # one trajectory -> lesson row per episode with a lesson
    for p, r in zip(prompts, responses):
        target = json.loads(tr.tokenizer.decode(r, skip_special_tokens=True))
        assert target == {"episode_summary": "m", "episode_skill": "LESSON-TEXT say the target"}
        assert "exactly in this form" in tr.tokenizer.decode(p)  # the analyser chat (its clipped end)
    tr.args.sft_on_trajectories = True  # + successful turns under their lesson prompt
    n_success_turns = sum(1 for t in rb.turns if rb.episodes[t.episode].success and t.response_ids)
    assert len(tr.sft_rows(rb)[0]) == 4 + n_success_turns


def test_external_analyser_writes_the_sft_lessons_and_the_policy_the_rl_ones(tmp_path):
    from agentgym.rl.testing import param_vector

    tr = make_trainer(
        tmp_path, prompt_style="bare", no_sft=False, analyser_model="tiny", sft_tasks=2, sft_group_size=2
    )
    assert tr.sft_analyse is not None and tr.analyser_model is not tr.model
    assert not torch.equal(param_vector(tr.analyser_model), param_vector(tr.model))  # its own weights

    def fixed(skill):
        return lambda chats: [json.dumps({"episode_summary": "s", "episode_skill": skill}) for _ in chats]

    tr.sft_analyse = fixed("FROM-EXTERNAL")
    tr.lesson_writer.analyse = fixed("FROM-POLICY")
    stats = tr.sft_stage()
    assert stats["sft/rows"] == 4 and tr.analyser_model is None  # freed once the SFT stage is done
    rb = tr.play(tr.next_tasks(), group_size=2, seed=1)
    assert {ep.extras["lesson"] for ep in rb.episodes} == {"FROM-POLICY"}
    tr._writer.close()
    from agentgym.episodes import read_episodes

    lessons = [e.extras["lesson"] for e in read_episodes(tmp_path / "seed" / "episodes.jsonl")]
    assert lessons == ["FROM-EXTERNAL"] * 4 + ["FROM-POLICY"] * 4


@pytest.mark.parametrize("path", folder_configs("seed", table_only=True), ids=lambda p: p.stem)
def test_seed_table_configs_pin_issue_16_values(path):
    import baselines.grpo
    import baselines.seed

    module = baselines.grpo if path.name.startswith("grpo_") else baselines.seed
    args = config_args(path)
    # several optimizer steps per iteration (mini-batch 256 rows of 16), as the SEED note; not one big step
    assert (args.mini_batch_size, args.micro_batch_size) == (256, 16)
    assert args.val_split == "valid_seen" and args.val_extra_splits == ["valid_unseen"]  # seen and unseen columns
    assert args.clip_ratio_c == 3.0 and args.episode_advantage == "rows"
    if module is baselines.seed:
        assert args.sft_epochs == 3 and args.sft_on_analysis and not args.sft_on_trajectories
        assert (args.sft_tasks, args.sft_group_size) == (180, 8)
        # the authors' SFT data sampling (prepare_data.sh, 0.4) and SFT optimizer step (trainer.sh, 8 rows)
        assert (args.sft_temperature, args.sft_mini_batch_size) == (0.4, 8)


def test_sft_stage_samples_at_its_own_temperature_and_steps_every_sft_mini_batch_rows(tmp_path):
    """``sft_temperature`` / ``sft_mini_batch_size`` (the SEED authors' 0.4 and 8 rows) reach the SFT stage only."""
    tr = make_trainer(
        tmp_path,
        prompt_style="bare",
        no_sft=False,
        sft_tasks=2,
        sft_group_size=2,
        temperature=1.0,
        sft_temperature=0.4,
        sft_mini_batch_size=1,
        mini_batch_size=64,
    )
    tr.lesson_writer.analyse = scripted_analyser
    temps, steps = [], []
    rollout = tr.rollout
    tr.rollout = lambda *a, **kw: temps.append(kw["temperature"]) or rollout(*a, **kw)
    tr.optimizer.register_step_post_hook(lambda *_: steps.append(1))
    stats = tr.sft_stage()
    assert temps == [0.4]
    rows = int(stats["sft/rows"])
    assert rows > 1 and len(steps) == rows * tr.args.update_epochs * tr.args.sft_epochs  # one step per row


def test_oracle_lessons_parse_and_the_probe_compares_lesson_conditioned_with_lesson_free_on_the_same_tasks(tmp_path):
    from agentgym.models.generation import Completion

    tr = make_trainer(
        tmp_path,
        env_id="agentgym/FrozenLakeNotSlippery-v0",
        prompt_style="bare",
        analyser_model="oracle",
        lesson_probe=True,
        num_tasks=3,
        group_size=2,
        max_turns=3,
    )
    seen = []

    class Left:  # always "left": the lesson is read only through the prompt the probe builds
        def generate(self, prompts, **kw):
            seen.extend(tr.tokenizer.decode(p) for p in prompts)
            ids = tr.tokenizer("left", add_special_tokens=False)["input_ids"]
            return [Completion(ids=ids, text="left", logprobs=None, finish_reason="stop") for _ in prompts]

    tr.generator = Left()
    tasks = tr.next_tasks()
    rb = tr.collect(tasks, seed=0)
    lessons = [ep.extras["lesson"] for ep in rb.episodes]
    assert all(lessons) and tr.lesson_writer.metrics(reset=False)["seed/lesson_parse_rate"] == 1.0
    m = tr.probe_metrics
    assert m["seed/probe_tasks"] == 3.0
    success = rb.episode_success()
    assert m["seed/lesson_free_success"] == pytest.approx(sum(success) / len(success))
    # the probe's prompts carry each task's first lesson (the lesson-free rollouts' do not)
    assert sum(any(lessons[g * 2] in s for s in seen) for g in range(3)) == 3
    assert m["seed/lesson_gap"] == pytest.approx(m["seed/lesson_conditioned_success"] - m["seed/lesson_free_success"])


def test_oracle_seed_fits_a_tiny_model_on_frozenlake_with_every_lesson_parsed(tmp_path):
    tr = make_trainer(
        tmp_path,
        env_id="agentgym/FrozenLakeNotSlippery-v0",
        analyser_model="oracle",
        lesson_probe=True,
        prompt_style="bare",
        max_turns=3,
        total_iterations=1,
    )
    metrics = tr.fit()
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["seed/lesson_parse_rate"] == metrics["seed/lesson_rate"] == 1.0
    assert metrics["seed/lesson_rows"] > 0 and 0.0 < metrics["seed/gate_mean"] < 1.0
    assert metrics["seed/probe_tasks"] == 2.0 and "seed/lesson_gap" in metrics


def test_without_its_distillation_term_seed_trains_exactly_as_grpo(tmp_path):
    """SEED's rollouts draw the same sampling seeds as GRPO's of the same RL seed, and its lessons (written by the
    policy's own sampler) and the teacher's scoring draw nothing from them: at lambda_opd 0 the weights after three
    iterations equal GRPO's bit for bit, so SEED against GRPO of the same seed isolates the distillation term (and
    the runs part only once the term has changed the weights)."""
    from agentgym.rl.testing import param_vector
    from agentgym.rl.trainer import Trainer
    from baselines import grpo

    common = dict(prompt_style="bare", total_iterations=3, learning_rate=1e-2, beta=0.01)
    ref = Trainer(grpo.Args(**tiny_echo(tmp_path / "grpo", "grpo", **common)), algo="grpo")
    ref.fit(grpo.compute_advantages, grpo.policy_loss)

    def seed_run(lambda_opd: float):
        tr = make_trainer(tmp_path / str(lambda_opd), lambda_opd=lambda_opd, **common)
        real, calls = tr.lesson_writer.analyse, iter(range(10_000))
        # the tiny model's own replies (sampled, never JSON) for half the calls, lessons that parse for the others
        tr.lesson_writer.analyse = lambda chats: real(chats) if next(calls) % 2 else scripted_analyser(chats)
        metrics = tr.fit()
        return param_vector(tr.model), metrics

    weights, metrics = seed_run(0.0)
    assert metrics["losses/opd_loss"] != 0.0  # the term is computed and weighted 0
    assert torch.equal(weights, param_vector(ref.model))
    assert not torch.equal(seed_run(1.0)[0], weights)  # with a weight, it moves them
