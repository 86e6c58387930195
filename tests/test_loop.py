"""The one turn loop (agentgym.loop): what agents see, the per-turn callback, and eval == rollout."""

from __future__ import annotations

import re

import pytest
import torch

from agentgym.agent_io import AgentAction
from agentgym.agents.base import RandomAgent
from agentgym.agents.llm import HFChat, LLMAgent
from agentgym.episodes import read_episodes
from agentgym.evaluation import run_episodes, seed_specs
from agentgym.loop import HIDDEN_INFO_KEYS, agent_view
from agentgym.models.generation import Completion, chat_prompt_ids
from agentgym.models.tiny import make_tiny_model
from agentgym.prompts import get_template
from agentgym.rl.rollout import collect_rollouts

torch.set_num_threads(1)


class Spy(RandomAgent):
    """A random agent that keeps everything the loop hands it."""

    name = "spy"

    def __init__(self):
        super().__init__(seed=0)
        self.inputs, self.ended = [], []

    def act(self, inputs):
        self.inputs.extend(inputs)
        return super().act(inputs)

    def on_episode_end(self, episode):
        self.ended.append(episode)


@pytest.mark.parametrize("env_id", ["agentgym/FrozenLake-v0", "agentgym/EchoBanditHidden-v0"])
def test_agents_never_see_the_seed_or_the_task_id_but_logs_keep_them(env_id, tmp_path):
    agent = Spy()
    log = tmp_path / "log.jsonl"
    specs = seed_specs(3, seed=100_000)
    run_episodes(env_id, agent, specs, batch_size=2, log_path=log)
    assert agent.inputs and len(agent.ended) == 3
    for inp in agent.inputs:
        assert inp.task_id is None
        assert not HIDDEN_INFO_KEYS & set(inp.info)
    for ep in agent.ended:
        assert ep.seed is None and ep.task_id is None and ep.options is None
        assert not HIDDEN_INFO_KEYS & set(ep.reset_info)
        assert all(not HIDDEN_INFO_KEYS & set(s.info) for s in ep.steps)
    logged = read_episodes(log)
    assert sorted(ep.seed for ep in logged) == [100_000, 100_001, 100_002]
    assert all(ep.task_id and ep.steps[0].info.get("task_id") == ep.task_id for ep in logged)


def test_a_seed_reading_agent_gains_nothing_on_the_hidden_bandit():
    """EchoBanditHidden's task id is the answer: an agent that plays it would always win if the loop leaked it."""

    class Cheat(RandomAgent):
        name = "cheat"

        def act(self, inputs):
            leaked = [x.task_id or x.info.get("task_id") for x in inputs]
            if all(leaked):
                return [AgentAction(action=str(w)) for w in leaked]
            return super().act(inputs)

    result = run_episodes("agentgym/EchoBanditHidden-v0", Cheat(seed=1), seed_specs(40), batch_size=8)
    first_try = [ep.steps[0].info["success"] for ep in result.episodes]
    assert sum(first_try) / len(first_try) < 0.6  # chance: 1 in 4


def test_on_turn_is_called_for_every_turn_before_episodes_end():
    seen = []
    result = run_episodes(
        "agentgym/FrozenLake-v0", RandomAgent(seed=3), seed_specs(4), batch_size=2, on_turn=seen.append
    )
    assert len(seen) == sum(ep.length for ep in result.episodes)
    assert [r.done for r in seen].count(True) == 4
    assert seen[0].t == 0 and all(r.inp.turn == r.t for r in seen)


def test_agent_view_shares_extras_so_agent_notes_reach_the_record():
    result = run_episodes("agentgym/EchoBandit-v0", RandomAgent(), seed_specs(1))
    ep = result.episodes[0]
    view = agent_view(ep)
    view.extras["note"] = "x"
    assert ep.extras["note"] == "x" and ep.seed == 0 and view.seed is None


class ScriptedGenerator:
    """HFGenerator's interface: answers with the word of the prompt at turn >= 1, a wrong word at turn 0."""

    def __init__(self, tok):
        self.tok = tok

    def generate(self, prompts, *, max_new_tokens, temperature=1.0, top_p=1.0, stop_strings=None, **kw):
        out = []
        for p in prompts:
            text = self.tok.decode(p)
            word = re.findall(r"Say the word: (\w+)", text)[-1]
            steps = re.search(r"already taken (\d+) step", text)
            reply = f"<think>x</think><action>{word if steps else 'zebra'}</action>"
            ids = self.tok(reply, add_special_tokens=False)["input_ids"]
            out.append(Completion(ids=ids, text=reply, logprobs=[-1.0] * len(ids), finish_reason="stop"))
        return out


def test_evaluation_and_rollouts_play_the_same_turns():
    """The same policy through run_episodes (LLMAgent) and collect_rollouts gives the same steps and prompts."""
    _, tok = make_tiny_model(seed=0)
    env, specs = "agentgym/EchoBandit-v0", seed_specs(3, seed=5)
    template = get_template(env)
    rb = collect_rollouts(
        ScriptedGenerator(tok), tok, env, specs, template=template, max_prompt_tokens=2048, seed=None
    )
    agent = LLMAgent(
        HFChat.from_generator(ScriptedGenerator(tok), tok, max_prompt_tokens=2048),
        template=template,
        temperature=1.0,
        max_new_tokens=512,
        seed=None,
    )
    ev = run_episodes(env, agent, specs, batch_size=3)

    def steps(eps):
        return [[(s.action, s.output, s.reward, s.prompt_tokens, s.completion_tokens) for s in ep.steps] for ep in eps]

    assert steps(rb.episodes) == steps(ev.episodes)
    assert any(len(ep.steps) > 1 for ep in ev.episodes)
    for e in range(len(specs)):
        turns = rb.episode_turns(e)
        assert [t.prompt_ids for t in turns] == [chat_prompt_ids(tok, agent.messages(t.inp)) for t in turns]
