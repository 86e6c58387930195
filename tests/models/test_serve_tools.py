"""``agentgym serve`` with OpenAI ``tools``: checking, rendering, parsing, and ``eval --tool-calls`` against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

import agentgym  # noqa: E402, F401
from agentgym.integrations.tools import openai_tools  # noqa: E402
from agentgym.models import tool_calls  # noqa: E402
from agentgym.models.openai_schema import ParamError  # noqa: E402
from agentgym.models.serve import ServerThread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV = "agentgym/FrozenLakeNotSlippery-v0"
TOOLS = openai_tools(ENV)
HI = [{"role": "user", "content": "search[wireless headphones] then click"}]


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


# -- parsing ---------------------------------------------------------------------------------------------------
def test_parse_one_call():
    content, calls = tool_calls.parse_tool_calls(call("move", direction="up"), {"move"})
    assert content is None and len(calls) == 1
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"] == {"name": "move", "arguments": '{"direction": "up"}'}


def test_parse_two_calls_text_around_and_parallel_off():
    text = "I go up twice.\n" + call("move", direction="up") + "\n" + call("move", direction="left")
    content, calls = tool_calls.parse_tool_calls(text, {"move"})
    assert content == "I go up twice."
    assert [json.loads(c["function"]["arguments"])["direction"] for c in calls] == ["up", "left"]
    assert len({c["id"] for c in calls}) == 2
    _, first = tool_calls.parse_tool_calls(text, {"move"}, parallel=False)
    assert [json.loads(c["function"]["arguments"]) for c in first] == [{"direction": "up"}]


def test_parse_open_last_call_and_string_arguments():
    text = '<tool_call>\n{"name": "move", "arguments": "{\\"direction\\": \\"down\\"}"}'  # no closing tag
    content, calls = tool_calls.parse_tool_calls(text, {"move"})
    assert content is None and json.loads(calls[0]["function"]["arguments"]) == {"direction": "down"}
    _, cut = tool_calls.parse_tool_calls(call("move", direction="up")[:-3], {"move"})  # "</tool_c": max_tokens
    assert json.loads(cut[0]["function"]["arguments"]) == {"direction": "up"}


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "move", "arguments": {"direction": "up"</tool_call>',  # malformed JSON
        call("jump", height="2"),  # not one of the tools
        call("move", direction="up") + call("jump"),  # one bad call spoils the reply
        '<tool_call>["move", "up"]</tool_call>',  # not an object
        '<tool_call>{"name": "move", "arguments": [1]}</tool_call>',  # arguments not an object
        "just text, no call",
        '<tool_call>\n{"name": "move", "argu',  # cut by max_tokens
    ],
)
def test_anything_but_valid_calls_is_plain_content(text):
    assert tool_calls.parse_tool_calls(text, {"move"}) == (text, [])


# -- checking --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tools", "choice", "param"),
    [
        ({"type": "function"}, None, "tools"),
        ([{"type": "retrieval"}], None, "tools[0]"),
        ([{"type": "function", "function": {"name": "bad name"}}], None, "tools[0].function.name"),
        ([{"type": "function", "function": {}}], None, "tools[0].function.name"),
        ([TOOLS[0], TOOLS[0]], None, "tools[1].function.name"),
        ([{"type": "function", "function": {"name": "f", "parameters": "x"}}], None, "tools[0].function.parameters"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}], None,
         "tools[0].function.parameters"),
        ([{"type": "function", "function": {"name": "f", "description": 3}}], None, "tools[0].function.description"),
        ([{"type": "function", "function": {"name": "f", "extra": 1}}], None, "tools[0].function"),
        (None, "auto", "tool_choice"),
        (TOOLS, "sometimes", "tool_choice"),
        (TOOLS, {"type": "function", "function": {"name": "jump"}}, "tool_choice"),
    ],
)  # fmt: skip
def test_malformed_tools_name_the_field(tools, choice, param):
    with pytest.raises(ParamError) as err:
        tool_calls.plan(tools, choice, None)
    assert err.value.param == param


def test_choices_and_prefill():
    assert tool_calls.plan(None, None, None).choice == "none"
    assert tool_calls.plan([], "none", None).parses is False
    auto = tool_calls.plan(TOOLS, None, False)
    assert auto.choice == "auto" and auto.prefill == "" and auto.names == {"move"} and not auto.parallel
    assert tool_calls.plan(TOOLS, "required", None).prefill == "<tool_call>\n"
    named = tool_calls.plan(TOOLS, {"type": "function", "function": {"name": "move"}}, None)
    assert named.prefill == '<tool_call>\n{"name": "move", "arguments": '
    # the prefill plus what the model writes next is a parsed call
    assert tool_calls.parse_tool_calls(named.prefill + '{"direction": "up"}}\n</tool_call>', named.names)[1]


# -- rendering -------------------------------------------------------------------------------------------------
HISTORY = [
    {"role": "system", "content": "Reach the goal."},
    {"role": "user", "content": "board 1"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "move", "arguments": '{"direction": "up"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "board 2"},
]  # fmt: skip


def test_fallback_block_for_a_template_without_tools(tiny):
    tok = tiny[1]
    assert not tool_calls.template_takes_tools(tok)
    text = tool_calls.render(tok, HISTORY, tool_calls.plan(TOOLS, None, None))
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nReach the goal.\n\n# Tools")
    assert json.dumps(TOOLS[0]) in system and "<tool_call>" in system
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "move", "arguments": {"direction": "up"}}\n</tool_call>' in text
    )
    assert "<|im_start|>user\n<tool_response>\nboard 2\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    none = tool_calls.render(tok, HISTORY, tool_calls.plan(TOOLS, "none", None))
    assert "# Tools" not in none and "<tool_response>" in none  # no tools offered; the history stays


def test_a_template_with_tools_renders_them_itself(tiny):
    chat_template_utils = pytest.importorskip("trl.chat_template_utils")
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=tiny[1].backend_tokenizer, eos_token="<|im_end|>")
    tok.chat_template = chat_template_utils.qwen2_5_chat_template
    assert tool_calls.template_takes_tools(tok)
    text = tool_calls.render(
        tok, HISTORY, tool_calls.plan(TOOLS, {"type": "function", "function": {"name": "move"}}, None)
    )
    ref = tok.apply_chat_template(
        [{**m, "content": m["content"] or ""} for m in HISTORY[:2]]
        + [{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "move", "arguments": {"direction": "up"}}}]},
           {"role": "tool", "tool_call_id": "c1", "content": "board 2"}],
        tools=TOOLS, tokenize=False, add_generation_prompt=True,
    )  # fmt: skip
    assert text == ref + '<tool_call>\n{"name": "move", "arguments": '
    assert "# Tools" in text and '{"name": "move", "arguments": {"direction": "up"}}' in text


# -- through the server ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tiny):
    with ServerThread(*tiny, name="tiny", max_tokens_cap=256) as url:
        yield openai.OpenAI(base_url=url, api_key="none", max_retries=0)


def test_a_request_with_tools_gets_a_well_formed_reply(client, tiny):
    kw = dict(model="tiny", messages=HISTORY, tools=TOOLS, max_tokens=12, temperature=1.0, seed=4)
    r = client.chat.completions.create(**kw)
    choice = r.choices[0]
    # a random tiny model writes no call: plain content, as without tools
    assert choice.message.tool_calls is None and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    text = tool_calls.render(tiny[1], HISTORY, tool_calls.plan(TOOLS, None, None))
    assert r.usage.prompt_tokens == len(tiny[1](text, add_special_tokens=False).input_ids)
    chunks = [c for c in client.chat.completions.create(stream=True, **kw) if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [choice.finish_reason]
    forced = client.chat.completions.create(
        **{**kw, "tool_choice": {"type": "function", "function": {"name": "move"}}}
    )
    assert forced.usage.prompt_tokens > r.usage.prompt_tokens  # the opening of the call is prefilled


def test_bad_tools_are_a_400_through_the_client(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="tiny", messages=HI, max_tokens=2, tools=[{"type": "function", "function": {"name": "a b"}}]
        )
    assert err.value.body["param"] == "tools[0].function.name" and "letters, digits" in err.value.body["message"]
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=[{"role": "tool", "content": "x"}], max_tokens=2)
    assert "tool_call_id" in err.value.body["message"]


# -- the loop: eval --tool-calls against our own server --------------------------------------------------------
@pytest.fixture(scope="module")
def taught(tmp_path_factory):
    """A tiny model taught to answer the tool-calling agent's prompts with the expert's ``move`` call."""
    from agentgym.agent_io import AgentInput
    from agentgym.agents.tool_agent import OpenAIToolAgent
    from agentgym.models.tiny import make_tiny_model, teach

    model, tok = make_tiny_model(seed=1)
    agent = OpenAIToolAgent("tiny", base_url="http://127.0.0.1:9/v1", history_length=1)
    plan = tool_calls.plan(TOOLS, None, None)
    pairs = []
    for seed in range(3):
        env = gym.make(ENV)
        obs, info = env.reset(seed=seed)
        history, done = [], False
        while not done:
            move = env.unwrapped.expert_action()
            inp = AgentInput(env_id=ENV, observation=obs, info=info, history=list(history))
            pairs.append(
                (tool_calls.render(tok, agent.messages(inp), plan), call("move", direction=move) + "<|im_end|>")
            )
            history.append((obs, move))
            obs, _, term, trunc, info = env.step(move)
            done = term or trunc
    return teach(model, tok, pairs, epochs=30), tok


@pytest.mark.timeout(600)
def test_eval_tool_calls_plays_an_env_through_our_server(taught, tmp_path):
    log = tmp_path / "tools.jsonl"
    with ServerThread(*taught, name="tiny") as url:
        out = subprocess.run(
            [sys.executable, "-m", "agentgym", "eval", "--env", ENV, "--episodes", "3", "--quiet",
             "--agent", "openai:tiny", "--tool-calls", "--base-url", url, "--temperature", "0",
             "--history-length", "1", "--max-new-tokens", "96", "--log", str(log)],
            capture_output=True, text=True, timeout=500, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        # the same server, asked directly: the taught call comes back as tool_calls, streamed or not
        from agentgym.agent_io import AgentInput
        from agentgym.agents.tool_agent import OpenAIToolAgent

        obs, info = gym.make(ENV).reset(seed=0)
        messages = OpenAIToolAgent("tiny", base_url=url).messages(AgentInput(ENV, obs, info))
        client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        kw = dict(model="tiny", messages=messages, tools=TOOLS, temperature=0, max_tokens=96)
        whole = client.chat.completions.create(**kw).choices[0]
        assert whole.finish_reason == "tool_calls" and whole.message.content is None
        assert whole.message.tool_calls[0].type == "function" and whole.message.tool_calls[0].function.name == "move"
        chunks = [c for c in client.chat.completions.create(stream=True, **kw) if c.choices]
        deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices[0].delta.tool_calls]
        assert len(deltas) == 1 and deltas[0][0].index == 0
        assert deltas[0][0].function.arguments == whole.message.tool_calls[0].function.arguments
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert out.returncode == 0, out.stderr[-2000:]
    episodes = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(episodes) == 3
    for ep in episodes:
        assert ep["steps"], ep
        env = gym.make(ENV)
        env.reset(seed=ep["seed"])
        for step in ep["steps"]:
            # every reply was parsed into a move tool call, which became the env's action
            assert step.get("extras", {}).get("format_valid", True), step
            played = json.loads(step["output"])
            assert played["name"] == "move" and json.loads(played["arguments"]) == {"direction": step["action"]}
            assert env.step(step["action"])[1] == step["reward"]  # the env's own reward for the called move
