"""ERL: reflection prompt/parsing, the consolidation loss, and the experience-reflection-consolidation loop."""

from __future__ import annotations

import dataclasses

import pytest

from agentgym.episodes import Episode, Step
from agentgym.prompts.reflection import (
    build_reflection_messages,
    episode_feedback,
    parse_reflection,
    raw_attempt_context,
)
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


def make_episode(success: bool, invalid: bool = False) -> Episode:
    steps = [
        Step(
            action="jump",
            observation="Nothing happens.",
            reward=0.0,
            terminated=False,
            truncated=False,
            info={
                "is_action_valid": not invalid,
                "success": False,
                **({"invalid_reason": "unknown action"} if invalid else {}),
            },
        ),
        Step(
            action="down",
            observation="You fell in a hole.",
            reward=1.0 if success else 0.0,
            terminated=True,
            truncated=False,
            info={"is_action_valid": True, "success": success},
        ),
    ]
    return Episode(env_id="agentgym/FrozenLakeNotSlippery-v0", seed=1, reset_observation="TASK-X P _ G", steps=steps)


def test_feedback_states_outcome_reward_and_invalid_actions():
    text = episode_feedback(make_episode(False, invalid=True))
    assert "not solved" in text and "1 action(s) were invalid (unknown action)" in text and "Total reward: 0" in text
    assert episode_feedback(make_episode(True)).startswith("The task was solved.")


def test_reflection_prompt_holds_task_attempt_feedback_and_memory():
    ep = make_episode(False)
    user = build_reflection_messages(ep, memory="MEM-RULE")[-1]["content"]
    assert "TASK-X" in user and "'down'" in user and "not solved" in user and "MEM-RULE" in user
    assert "<reflection>" in user
    assert "MEM-RULE" not in build_reflection_messages(ep, memory=None)[-1]["content"]
    rule = build_reflection_messages(ep, memory=None, form="rulebook", system_prompt="OLD-SYS")[-1]["content"]
    assert "OLD-SYS" in rule and "<prompt>" in rule
    # rulebook form rewrites the memory (the last rulebook that worked) rather than the initial prompt
    assert "MEM" in build_reflection_messages(ep, memory="MEM", form="rulebook", system_prompt="OLD")[-1]["content"]
    with pytest.raises(ValueError, match="in_context"):
        build_reflection_messages(ep, form="bogus")


@pytest.mark.parametrize(
    "text, form, expected",
    [
        ("<think>hmm</think><reflection>Go right first.</reflection>", "in_context", "Go right first."),
        ("<reflection>a</reflection> then <reflection>b</reflection>", "in_context", "b"),
        ("<think>x</think>Avoid the hole.", "in_context", "Avoid the hole."),
        ("<reflection>cut by the limit", "in_context", "cut by the limit"),
        ("<prompt>RULES</prompt>", "rulebook", "RULES"),
        ("<think>only thinking</think>", "in_context", None),
        ("", "in_context", None),
    ],
)
def test_parse_reflection(text, form, expected):
    assert parse_reflection(text, form) == expected


@pytest.mark.parametrize(
    "text, form, tagged",
    [
        ("<reflection>Go right.</reflection>", "in_context", True),
        ("<reflection>cut by the limit", "in_context", False),
        ("Avoid the hole.", "in_context", False),
        ("</reflection> wrong order <reflection>", "in_context", False),
        ("<prompt>RULES</prompt>", "rulebook", True),
        ("<reflection>x</reflection>", "rulebook", False),
    ],
)
def test_reflection_tagged_counts_only_closed_blocks_of_the_form(text, form, tagged):
    from baselines.erl import reflection_tagged

    assert reflection_tagged(text, form) is tagged


def test_no_reflection_context_is_the_raw_attempt():
    ctx = raw_attempt_context(make_episode(False))
    assert "TASK-X" in ctx and "'down'" in ctx and "Feedback:" in ctx


# -- losses -----------------------------------------------------------------------------------------------
import math  # noqa: E402
import re  # noqa: E402

import torch  # noqa: E402

from agentgym.models.generation import Completion  # noqa: E402
from baselines.erl import Args, ErlTrainer, consolidation_loss, grouped_advantages  # noqa: E402


def test_consolidation_loss_is_masked_nll_of_successful_rows_only():
    logps = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -9.0], [-4.0, -4.0, -4.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    keep = torch.tensor([1.0, 1.0, 0.0])  # third row: failed second attempt, not distilled
    loss = consolidation_loss(logps, mask, keep)
    assert loss.item() == pytest.approx((1 + 2 + 0.5 + 0.5 + 9) / 5)
    loss.backward()
    expected = -torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]], dtype=torch.float32) / 5
    assert torch.allclose(logps.grad, expected)


def test_grouped_advantages_normalise_within_each_group():
    adv = grouped_advantages([1.0, 0.0, 5.0, 2.0, 2.0], [0, 0, 1, 2, 2])
    s = math.sqrt(0.5)  # unbiased std of (1, 0)
    assert adv[0] == pytest.approx(0.5 / s, rel=1e-4) and adv[1] == pytest.approx(-0.5 / s, rel=1e-4)
    assert adv[2] == 0.0  # a group of one has nothing to compare with
    assert adv[3] == adv[4] == 0.0


# -- the loop, with a scripted policy --------------------------------------------------------------------
WORDS = ["apple", "river", "stone", "cloud", "green", "light", "table", "music"]


class ScriptedPolicy:
    """Answers like a policy would, chosen by what the prompt contains.

    First attempts say a wrong word; a reflector prompt gets ``<reflection>say <target></reflection>``; a
    second attempt whose prompt carries the reflection says the target -- except for targets in ``fail``.
    """

    def __init__(self, tokenizer, fail=()):
        self.tok = tokenizer
        self.fail = set(fail)
        self.calls = []

    def generate(self, prompts, **kw):
        out = []
        for ids in prompts:
            text = self.tok.decode(ids)
            self.calls.append(text)
            target = re.findall(r"Say the word: (\w+)", text)[-1]
            wrong = next(w for w in WORDS if w != target)
            if "<reflection>" in text:
                reply = f"<reflection>say {target}</reflection>"
            elif f"say {target}" in text:
                reply = wrong if target in self.fail else target
            else:
                reply = wrong
            rid = self.tok(reply, add_special_tokens=False)["input_ids"]
            out.append(Completion(ids=rid, text=reply, logprobs=None, finish_reason="stop"))
        return out


def make_trainer(tmp_path, **kw):
    return ErlTrainer(
        Args(**tiny_echo(tmp_path, "erl", **{"prompt_style": "bare", "reflection_max_new_tokens": 16, **kw}))
    )


def targets_of(exp):
    return [ep.reset_info["task_id"] for ep in exp.first.episodes]


def test_failed_first_attempt_gets_reflection_second_attempt_and_rewards(tmp_path):
    tr = make_trainer(tmp_path)
    tr.generator = ScriptedPolicy(tr.tokenizer)
    tasks = tr.next_tasks()
    exp = tr.experience(tasks, seed=0)
    assert exp.first.success_rate() == 0.0 and exp.failed == [0, 1, 2, 3]
    targets = targets_of(exp)
    assert [exp.reflections[e] for e in exp.failed] == [f"say {t}" for t in targets]
    # the second attempt replays the same task with the reflection in its prompt
    assert [ep.reset_info["task_id"] for ep in exp.second.episodes] == targets
    for turn, t in zip(exp.second.turns, targets):
        assert f"say {t}" in turn.messages[-1]["content"]
    assert exp.second.success_rate() == 1.0
    batch, stats = tr.erl_batch(exp)
    parts = [m["part"] for m in batch.meta]
    assert parts.count("first") == 4 and parts.count("reflection") == 4 and parts.count("second") == 4
    assert parts.count("consolidation") == 4
    for m in batch.meta:
        if m["part"] == "first":
            assert m["reward"] == (0.0 if m["valid"] else -0.1)  # wrong word: no reward (penalty if inadmissible)
        elif m["part"] in ("reflection", "second", "consolidation"):
            assert m["reward"] == 1.0  # a reflection is rewarded with its second attempt's return
    # consolidation rows: the second attempt's tokens in the reflection-free prompt
    tok = tr.tokenizer
    cons = [i for i, p in enumerate(parts) if p == "consolidation"]
    sec = [i for i, p in enumerate(parts) if p == "second"]
    for i, j in zip(cons, sec):
        ids_c = batch["input_ids"][i][batch["attention_mask"][i].bool()].tolist()
        ids_s = batch["input_ids"][j][batch["attention_mask"][j].bool()].tolist()
        assert "say " not in tok.decode(ids_c) and "say " in tok.decode(ids_s)
        n = int(batch["completion_mask"][i].sum())
        assert ids_c[-n:] == ids_s[-n:]  # same response tokens
    assert batch["distill_weight"][cons].tolist() == [1.0] * 4 and batch["rl_weight"][cons].tolist() == [0.0] * 4
    # every reflection is readable in the episode log (written as soon as the second attempts end)
    tr._writer.close()
    from agentgym.episodes import read_episodes

    logged = read_episodes(tmp_path / "erl" / "episodes.jsonl")
    firsts = [e for e in logged if e.extras["erl"]["attempt"] == 1]
    assert firsts and all(e.extras["erl"]["reflection"].startswith("say ") for e in firsts)
    assert any(e.extras["erl"]["attempt"] == 2 for e in logged)


def test_consolidation_weight_indicator_or_raft_of_the_second_return(tmp_path):
    from baselines.erl import consolidation_weight

    assert [consolidation_weight(r, "indicator") for r in (1.0, 0.4, 0.0, -0.3)] == [1.0, 1.0, 0.0, 0.0]
    assert [consolidation_weight(r, "raft") for r in (1.0, 0.4, 0.0, -0.3)] == [1.0, 0.4, 0.0, 0.0]
    with pytest.raises(ValueError, match="consolidation_weight"):
        make_trainer(tmp_path / "bad", consolidation_weight="sft")
    # a partial second attempt (HotpotQA F1 0.4, say) is distilled: weight 1 (paper) or 0.4 (authors' code)
    for mode, expected in (("indicator", 1.0), ("raft", 0.4)):
        tr = make_trainer(tmp_path / mode, consolidation_weight=mode)
        tr.generator = ScriptedPolicy(tr.tokenizer, fail=WORDS)  # every second attempt fails (return 0)
        exp = tr.experience(tr.next_tasks(), seed=0)
        exp.second.episodes[0].steps[-1].reward = 0.4
        batch, _ = tr.erl_batch(exp)
        cons = [i for i, m in enumerate(batch.meta) if m["part"] == "consolidation"]
        assert [batch.meta[i]["episode"] for i in cons] == [0]  # only the attempt with a positive return
        assert batch["distill_weight"][cons].tolist() == pytest.approx([expected])


def test_memory_updates_only_when_the_second_attempt_succeeds(tmp_path):
    tr = make_trainer(tmp_path)
    tasks = tr.next_tasks()
    tr.generator = ScriptedPolicy(tr.tokenizer, fail=WORDS)  # every second attempt fails
    exp = tr.experience(tasks, seed=0)
    assert exp.second.success_rate() == 0.0 and tr.memory is None and exp.memory_updates == 0
    batch, _ = tr.erl_batch(exp)
    assert [m["part"] for m in batch.meta].count("consolidation") == 0  # nothing to distil
    targets = targets_of(exp)
    tr.generator = ScriptedPolicy(tr.tokenizer, fail=set(WORDS) - {targets[0]})  # only the first task succeeds
    exp = tr.experience(tasks, seed=0)
    assert tr.memory == f"say {targets[0]}" and exp.memory_updates >= 1
    # the memory is shown to the reflector on the next iteration
    tr.generator = ScriptedPolicy(tr.tokenizer, fail=WORDS)
    tr.experience(tasks, seed=0)
    reflector_prompts = [c for c in tr.generator.calls if "<reflection>" in c]
    assert reflector_prompts and all(f"say {targets[0]}" in c for c in reflector_prompts)
    assert tr.memory == f"say {targets[0]}"  # failures leave it unchanged


def test_ablation_flags_change_what_is_trained(tmp_path):
    tr = make_trainer(tmp_path / "a", no_consolidation=True, train_first_attempt=False)
    tr.generator = ScriptedPolicy(tr.tokenizer)
    batch, _ = tr.erl_batch(tr.experience(tr.next_tasks(), seed=0))
    parts = [m["part"] for m in batch.meta]
    assert "consolidation" not in parts and "first" not in parts  # switched-off parts add no rows
    assert {"reflection", "second"} <= set(parts)

    tr = make_trainer(tmp_path / "b", no_reflection=True)
    tr.generator = ScriptedPolicy(tr.tokenizer)
    exp = tr.experience(tr.next_tasks(), seed=0)
    assert not any("<reflection>" in c for c in tr.generator.calls)  # no reflector call
    assert all("previous attempt" in exp.reflections[e] for e in exp.failed)  # raw attempt as context
    batch, _ = tr.erl_batch(exp)
    assert "reflection" not in [m["part"] for m in batch.meta] and tr.memory is None

    tr = make_trainer(tmp_path / "c", no_memory=True)
    tr.generator = ScriptedPolicy(tr.tokenizer)
    tr.experience(tr.next_tasks(), seed=0)
    assert tr.memory is None


def test_rulebook_form_puts_the_reflection_in_the_system_prompt(tmp_path):
    tr = make_trainer(tmp_path, reflection_form="rulebook")
    assert tr.second_attempt_kwargs("RULES") == {"system": "RULES"}
    assert make_trainer(tmp_path / "x").second_attempt_kwargs("TIP") == {"reflection": "TIP"}
    with pytest.raises(ValueError, match="reflection_form"):
        make_trainer(tmp_path / "y", reflection_form="nope")


def test_erl_smoke_tiny_model_trains(tmp_path):
    from agentgym.rl.testing import param_vector

    tr = make_trainer(
        tmp_path,
        total_iterations=2,
        learning_rate=1e-2,
        max_new_tokens=3,
        reflection_max_new_tokens=6,
        restrict_vocab=WORDS[:4],
        max_prompt_tokens=96,
    )
    before = param_vector(tr.model)
    metrics = tr.fit()
    assert not torch.equal(before, param_vector(tr.model))
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["charts/env_episodes"] >= 8
    assert 0.0 <= metrics["erl/reflection_tagged_rate"] <= 1.0


@pytest.mark.parametrize("path", folder_configs("erl"), ids=lambda p: p.stem)
def test_erl_configs_load(path):
    assert config_args(path).exp_name == path.stem


@pytest.mark.slow
def test_erl_learns_and_compares_with_grpo_at_equal_episodes(tmp_path):
    """ERL's no-reflection (first-attempt) success rises on EchoBandit; GRPO gets the same number of episodes."""
    from tests.baselines import curves

    cfg = "baselines/configs/erl/erl_echo_tiny.yaml"
    erl = curves.run("erl", cfg, tmp_path)
    x_erl = curves.episodes_axis(erl, 0)
    per_it = 8 * 8
    grpo = curves.run("grpo", cfg, tmp_path, total_iterations=math.ceil(x_erl[-1] / per_it))
    s_erl = [h["charts/success_rate"] for h in erl]
    s_grpo = [h["charts/success_rate"] for h in grpo]
    curves.save(
        "erl_vs_grpo_echo",
        {"ERL (first attempt)": (x_erl, s_erl), "GRPO": (curves.episodes_axis(grpo, per_it), s_grpo)},
        "EchoBandit, tiny model: ERL vs GRPO",
    )
    first, last = sum(s_erl[:10]) / 10, sum(s_erl[-10:]) / 10
    assert last > first + 0.15, (first, last)
    assert sum(h["erl/num_reflections"] for h in erl) > 0 and sum(h["erl/rows_consolidation"] for h in erl) > 0
    g_first, g_last = sum(s_grpo[:10]) / 10, sum(s_grpo[-10:]) / 10
    assert g_last > g_first + 0.15, (g_first, g_last)  # the comparison run learns too (else the budget is wrong)


def test_memory_survives_resume(tmp_path):
    tr = make_trainer(tmp_path)
    tr.memory = "push the box from the left"
    tr.total_episodes = 7
    tr.iteration = 1
    tr.save()
    tr._writer.close()
    again = make_trainer(tmp_path, resume=True)
    assert again.memory == "push the box from the left" and again.total_episodes == 7 and again.iteration == 1


@pytest.mark.slow
def test_erl_first_attempts_with_consolidation_learn(tmp_path):
    """ERL with RL on first attempts + consolidation of successful second attempts (no RL on reflections or
    second attempts): the no-reflection success rises (measured 0.13 -> 0.54 over 70 iterations)."""
    from tests.baselines import curves

    hist = curves.run(
        "erl",
        "baselines/configs/erl/erl_echo_tiny.yaml",
        tmp_path,
        train_reflection=False,
        train_second_attempt=False,
        total_iterations=70,
    )
    s = [h["charts/success_rate"] for h in hist]
    assert sum(h["erl/rows_consolidation"] for h in hist) > 0
    first, last = sum(s[:10]) / 10, sum(s[-10:]) / 10
    assert last > first + 0.15, (first, last)


PAPER_CONFIGS = sorted(
    p
    for p in (__import__("pathlib").Path(__file__).parents[2] / "baselines/configs/erl").glob("erl_*.yaml")
    if "tiny" not in p.name
)


CONFIG_CASES = [(p, None) for p in PAPER_CONFIGS] + [(PAPER_CONFIGS[-1], "in_context")]


@pytest.mark.parametrize("path,form", CONFIG_CASES, ids=[p.stem + (f"-{f}" if f else "") for p, f in CONFIG_CASES])
def test_paper_config_trains_one_iteration_with_a_tiny_model(tmp_path, path, form):
    """Each table config on its own env, prompt style and reflection prompts, shrunk to a tiny model."""
    from agentgym.rl.config import load_config_file, make_args
    from agentgym.rl.testing import param_vector

    cfg = load_config_file(path)
    if "HotpotQA" in cfg["env_id"]:
        from tests.conftest import require_data

        require_data("hotpotqa")
    cfg.update(
        model="tiny",
        dtype="float32",
        gradient_checkpointing=False,
        num_tasks=2,
        group_size=2,
        max_turns=2,
        max_new_tokens=6,
        reflection_max_new_tokens=6,
        max_prompt_tokens=2048,
        learning_rate=1e-3,
        total_iterations=1,
        val_every=0,
        output_dir=str(tmp_path),
        progress=False,
        plot=False,
        save_every=0,
    )
    if form is not None:
        cfg["reflection_form"] = form
    tr = ErlTrainer(make_args(Args, cfg))
    before = param_vector(tr.model)
    metrics = tr.fit()
    assert not torch.equal(before, param_vector(tr.model))
    assert all(math.isfinite(v) for v in metrics.values())
    # random text never solves these tasks: every first attempt is reflected on and retried
    assert metrics["erl/num_reflections"] == 4 and metrics["erl/rows_reflection"] == 4
    lines = (tmp_path / cfg["exp_name"] / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 8  # 4 first + 4 second attempts, each with its ERL record


@pytest.mark.parametrize("path", folder_configs("erl", table_only=True), ids=lambda p: p.stem)
def test_erl_configs_follow_the_authors_scripts(path):
    """Issue 16 item 5: full history, the authors' validation sampling, rulebook form (every line's source:
    test_configs.py's test_every_table_setting_names_its_source_kind)."""
    import baselines.erl
    import baselines.grpo

    module = baselines.grpo if path.name.startswith("grpo_") else baselines.erl
    args = config_args(path)
    assert args.history_length == -1  # the authors accumulate the whole interaction
    hotpot = "hotpotqa" in path.stem
    # train_erl_{sokoban,frozenlake}.sh: val_kwargs.n=4; the hotpot scripts: n=1; all: top_p 0.8, top_k 20
    assert (args.val_group_size, args.val_top_p, args.val_top_k) == (1 if hotpot else 4, 0.8, 20)
    assert args.val_temperature == 0.7 and args.temperature == 0.7
    assert args.epsilon_low == 0.2 and args.epsilon_high == 0.28 and args.clip_ratio_c == 3.0
    if module is baselines.erl:
        assert args.reflection_form == "rulebook"
    else:
        assert args.episode_advantage == "episodes"  # rllm: one advantage per trajectory
    if not hotpot:
        assert args.prompt_style == "erl"


def test_erl_grid_prompt_uses_the_authors_answer_format():
    from agentgym.agent_io import AgentInput
    from agentgym.prompts import get_template

    t = get_template("agentgym/SokobanLetters-v0", "erl")
    assert t.version == "2" and t.stop_strings == ()
    inp = AgentInput(
        env_id="agentgym/SokobanLetters-v0", observation="EEEE\nEADE", info={"action_words": ["Up", "Down"]}
    )
    text = t.build(inp)[-1]["content"]
    assert "<reason>" in text and "```Up```" in text and "<action>" not in text
    p = t.parse("<reason>box is left of me</reason>\nthinking ```Down``` no wait\n```Up```")
    assert p.valid and p.action == "Up" and p.think == "box is left of me"
    assert not t.parse("<reason>x</reason> <action>Up</action>").valid  # the old format is not this template's
    assert not t.parse("``` ```").valid


def test_validation_samples_as_configured(tmp_path):
    """val_group_size episodes per task with val_top_p / val_top_k reach the generator; top_k 1 is greedy."""
    from agentgym.rl.testing import tiny_echo_args
    from agentgym.rl.trainer import Trainer

    args = tiny_echo_args(Args, tmp_path / "v", val_every=5, val_group_size=3, val_top_p=0.8, val_top_k=20)
    args.val_tasks = 2
    tr = Trainer(args, algo="erl")
    seen = []
    real = tr.generator.generate

    def spy(prompts, **kw):
        seen.append((len(prompts), kw.get("top_p"), kw.get("top_k")))
        return real(prompts, **kw)

    tr.generator.generate = spy
    tr.validate()
    assert seen and seen[0] == (6, 0.8, 20)  # 2 tasks x 3 samples in one batched call
    # top_k = 1 at temperature 1 is greedy decoding
    prompts = [[1, 2, 3], [4, 5]]
    greedy = [c.ids for c in real(prompts, max_new_tokens=4, temperature=0.0)]
    assert [c.ids for c in real(prompts, max_new_tokens=4, temperature=1.0, top_k=1, seed=3)] == greedy


# -- oracle reflections (the privileged grid analyser) ----------------------------------------------------------
class PlanReader:
    """A policy for the bare FrozenLake prompt: with a reflection holding a plan (``at row R col C go M``) it plays
    the move listed for P's cell; without one it always says ``left``."""

    def __init__(self, tokenizer):
        self.tok = tokenizer

    def generate(self, prompts, **kw):
        out = []
        for ids in prompts:
            text = self.tok.decode(ids, skip_special_tokens=True)
            walk = dict(re.findall(r"at (row \d+ col \d+) go (\w+)", text))
            board = [ln for ln in text.splitlines() if ln and set(ln) <= set("P_OG")]
            here = next((f"row {r + 1} col {ln.index('P') + 1}" for r, ln in enumerate(board[-4:]) if "P" in ln), "")
            reply = walk.get(here, "left")
            rid = self.tok(reply, add_special_tokens=False)["input_ids"]
            out.append(Completion(ids=rid, text=reply, logprobs=None, finish_reason="stop"))
        return out


def test_oracle_reflections_make_second_attempts_beat_first_attempts_on_the_same_tasks(tmp_path):
    tr = make_trainer(
        tmp_path,
        env_id="agentgym/FrozenLakeNotSlippery-v0",
        reflector="oracle",
        num_tasks=6,
        group_size=2,
        max_turns=None,
        max_new_tokens=4,
    )
    tr.generator = PlanReader(tr.tokenizer)
    tasks = tr.next_tasks()
    exp = tr.experience(tasks, seed=0)
    assert exp.failed and not exp.reflection_rows  # oracle text is not the policy's: no reflection rows to train
    for e in exp.failed:
        assert exp.reflections[e].startswith("Last time:") and "Plan from the start: at row" in exp.reflections[e]
    batch, _ = tr.erl_batch(exp)
    m = tr.iteration_metrics(exp, batch, 1.0)
    # the paired comparison: each second attempt against the first attempts of its own task
    G = tr.args.group_size
    first_same = [
        sum(exp.first.episodes[j].success for j in range(e // G * G, e // G * G + G)) / G for e in exp.failed
    ]
    assert m["erl/first_success_same_tasks"] == pytest.approx(sum(first_same) / len(first_same))
    assert m["erl/second_success_rate"] == 1.0 > m["erl/first_success_same_tasks"]  # the plan is informative
    assert m["erl/second_minus_first_same_tasks"] == pytest.approx(1.0 - m["erl/first_success_same_tasks"])
    assert m["erl/reflection_tagged_rate"] == 1.0
    # an iteration whose first attempts all succeeded has no second attempt and no reflection: no rate at all,
    # rather than rates of 0 that would drag the per-run means down
    none_failed = dataclasses.replace(
        exp, failed=[], reflections={}, reflection_rows={}, reflection_raw={}, second=None
    )
    m = tr.iteration_metrics(none_failed, batch, 1.0)
    assert m["erl/num_reflections"] == 0.0
    for key in ("second_success_rate", "first_success_same_tasks", "second_minus_first_same_tasks"):
        assert f"erl/{key}" not in m
    assert "erl/reflection_tagged_rate" not in m


def test_unknown_reflector_is_refused(tmp_path):
    with pytest.raises(ValueError, match="reflector must be"):
        make_trainer(tmp_path, reflector="gpt")


def test_oracle_erl_fits_a_tiny_model_on_frozenlake_and_logs_the_paired_metric(tmp_path):
    tr = make_trainer(
        tmp_path,
        env_id="agentgym/FrozenLakeNotSlippery-v0",
        reflector="oracle",
        total_iterations=1,
        max_turns=3,
        max_new_tokens=4,
        max_prompt_tokens=512,
    )
    metrics = tr.fit()
    assert all(math.isfinite(v) for v in metrics.values())
    if metrics["erl/num_reflections"]:  # a random tiny model fails (nearly) every first attempt
        assert metrics["erl/reflection_tagged_rate"] == 1.0
        assert 0.0 <= metrics["erl/first_success_same_tasks"] <= 1.0
    assert metrics["erl/rows_reflection"] == 0.0  # oracle text is never trained as the policy's


def test_first_attempt_baseline_of_a_failed_attempt_leaves_that_attempt_out():
    """A failed first attempt's task is judged by its other first attempts: counting the failure itself would bias
    the baseline of the paper's comparison (second vs first attempts) down by (G - 1) / G."""
    from baselines.erl import other_attempts_success

    successes = [False, True, True, False, False, False, True, False]  # two tasks, G = 4
    assert other_attempts_success(successes, 0, 4) == 2 / 3
    assert other_attempts_success(successes, 3, 4) == 2 / 3
    assert other_attempts_success(successes, 5, 4) == 1 / 3
