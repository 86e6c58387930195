"""Golden values for the conformance suite, computed by running verl-agent's own code on canned batches.

The canned batch (:func:`canned_batch`) holds the cases where implementations part ways: a group with mixed
rewards and repeated anchor states, a group whose rewards are all equal with only format-penalty failures, a
one-episode group, a one-row group, and padded responses of different lengths. This script runs the reference
functions of a verl-agent source tree on it and writes one JSON fixture (format: docs/conformance.md)::

    git -C verl-agent archive d0b9724 verl gigpo | tar -x -C /tmp/va      # any checkout of the commit
    python tools/conformance_golden.py --checkout /tmp/va --commit d0b9724 --out tests/conformance/fixtures
    git -C experiential_rl archive 20cd646 verl/verl | tar -x -C /tmp/erl
    python tools/conformance_golden.py --repo experiential_rl --checkout /tmp/erl --commit 20cd646

For microsoft/experiential_rl (ERL's code) the fixture holds the consolidation term: the authors distil rewarded
second attempts with verl's ``raft`` advantage (the outcome reward clamped at 0) through their vendored verl's
PPO loss (``loss_agg_mode=seq-mean-token-sum``, their scripts' setting); those functions are run on their own
(read out of the file by name, so the rest of their verl is never imported).

Nothing of verl-agent is imported by the tests: they read the fixture. The reference modules are loaded from
the checkout with an empty ``verl`` package in front of them, so its ``__init__`` (ray, pandas) never runs.
The pipeline around the reference functions (where verl-agent's trainer puts the episode reward, subtracts
the invalid-action penalty, and divides each micro-batch's loss by the gradient-accumulation steps) is
re-stated here from ``verl/trainer/ppo/ray_trainer.py`` and ``verl/workers/actor/dp_actor.py`` at the commit.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
# the references' torch_functional imports tensordict: make setup installs it with verl in .verl-ref/
sys.path.append(str(ROOT / ".verl-ref"))
FORMAT = "agentgym-conformance/1"
GAMMA = 0.95
PENALTY = 0.1
T = 6  # response positions (padding after each row's length)
MICRO = 5  # rows per micro-batch in the loss cases (25 rows: 5 micro-batches, as verl needs a divisor)
ERAS = {"f974dc5": "paper", "d0b9724": "2025-10"}


def canned_batch() -> dict[str, Any]:
    """The turn rows: per row its task group, episode, turn index, env reward (10 x success on the winning
    turn), whether the output parsed (format-valid), its anchor observation and its response length."""
    rows: list[dict[str, Any]] = []

    def episode(group: int, ep: int, anchors: list[str], won: bool, bad: set[int], lengths: list[int]) -> None:
        for t, obs in enumerate(anchors):
            last = t == len(anchors) - 1
            rows.append(
                {
                    "group": group,
                    "episode": ep,
                    "t": t,
                    "env_reward": 10.0 if (won and last) else 0.0,
                    "format_valid": t not in bad,
                    "anchor": obs,
                    "length": lengths[t],
                }
            )

    # group 0: mixed outcomes, anchors "s0" and "s1" reached by several episodes
    episode(0, 0, ["s0", "s1", "s2"], True, set(), [3, 6, 2])
    episode(0, 1, ["s0", "s1", "s3", "s4"], False, {2}, [4, 1, 6, 5])
    episode(0, 2, ["s0", "s5", "s1", "s2"], True, {1}, [2, 2, 3, 6])
    episode(0, 3, ["s0", "s1", "s3"], False, {0, 2}, [5, 4, 1])
    # group 1: every episode fails; only format penalties tell them apart
    episode(1, 4, ["u0", "u1"], False, {1}, [6, 3])
    episode(1, 5, ["u0", "u1", "u2"], False, set(), [2, 5, 4])
    episode(1, 6, ["u0", "u2"], False, {0, 1}, [1, 6])
    # group 2: a single episode (one-episode group)
    episode(2, 7, ["v0", "v1", "v0"], True, {0}, [4, 4, 2])
    # group 3: a single row
    episode(3, 8, ["w0"], False, {0}, [3])
    g = torch.Generator().manual_seed(39)
    n = len(rows)
    mask = torch.zeros(n, T)
    for i, r in enumerate(rows):
        mask[i, : r["length"]] = 1.0
    tensors = {
        "response_mask": mask,
        "log_prob": -torch.rand(n, T, generator=g) * 2.0 - 0.05,
        "entropy": torch.rand(n, T, generator=g) * 3.0,
        "values": torch.randn(n, T, generator=g),
        "old_values": torch.randn(n, T, generator=g),
        "returns": torch.randn(n, T, generator=g) * 2.0,
    }
    # old / reference log-probs: ratios from ~0.3 to ~3.5, so both PPO clips and the dual clip are active
    tensors["old_log_prob"] = tensors["log_prob"] + torch.randn(n, T, generator=g) * 0.6
    tensors["ref_log_prob"] = tensors["log_prob"] + torch.randn(n, T, generator=g) * 0.5
    tensors["advantages"] = torch.randn(n, T, generator=g) * 1.5 * mask
    return {"rows": rows, "tensors": {k: v.tolist() for k, v in tensors.items()}}


def load_reference(checkout: Path) -> tuple[Any, Any]:
    """verl-agent's ``core_algos`` and ``core_gigpo`` modules from ``checkout``, without running ``verl/__init__``."""
    sys.path.insert(0, str(checkout))
    for name in ("verl", "verl.utils", "verl.trainer", "verl.trainer.ppo"):
        mod = types.ModuleType(name)
        mod.__path__ = [str(checkout / name.replace(".", "/"))]
        sys.modules[name] = mod
    sys.modules["verl"].DataProto = object  # only a type annotation in core_gigpo
    import gigpo.core_gigpo as core_gigpo
    import verl.trainer.ppo.core_algos as core_algos

    return core_algos, core_gigpo


def _tensors(batch: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, dtype=torch.float32) for k, v in batch["tensors"].items()}


def reference_advantages(core_algos: Any, core_gigpo: Any, batch: dict[str, Any], era: str) -> dict[str, Any]:
    """GiGPO (both modes), GRPO and RLOO advantages per row as verl-agent's trainer computes them."""
    rows = batch["rows"]
    t = _tensors(batch)
    mask = t["response_mask"]
    n = len(rows)
    invalid = np.array([0.0 if r["format_valid"] else 1.0 for r in rows], dtype=np.float32)
    index = np.array([str(r["group"]) for r in rows], dtype=object)
    traj = np.array([str(r["episode"]) for r in rows], dtype=object)
    anchors = np.array([r["anchor"] for r in rows], dtype=object)
    last = mask.sum(-1).long() - 1
    # the episode reward on every step's last response token, then 0.1 off where the step was invalid
    ep_reward: dict[int, float] = {}
    for r in rows:
        ep_reward[r["episode"]] = ep_reward.get(r["episode"], 0.0) + r["env_reward"]
    tlr = torch.zeros_like(mask)
    for i, r in enumerate(rows):
        tlr[i, last[i]] = ep_reward[r["episode"]] - PENALTY * float(invalid[i])
    # step rewards: discounted unpenalised env rewards, then 0.1 off this row's own return
    ns = types.SimpleNamespace(
        non_tensor_batch={
            "rewards": np.array([r["env_reward"] for r in rows], dtype=np.float32),
            "traj_uid": traj,
            "active_masks": np.ones(n, dtype=bool),
        },
        batch={"input_ids": torch.zeros(n, 1)},
    )
    step_rewards = core_gigpo.compute_step_discounted_returns(ns, GAMMA) - PENALTY * torch.tensor(invalid)
    out: dict[str, Any] = {"step_rewards": step_rewards.tolist()}
    for mode in ("mean_std_norm", "mean_norm"):
        kw: dict[str, Any] = {"step_advantage_w": 1.0, "mode": mode}
        if era == "2025-10":
            adv, _ = core_gigpo.compute_gigpo_outcome_advantage(
                tlr.clone(), step_rewards.clone(), mask, anchors, index, traj, **kw
            )
        else:
            adv, _ = core_gigpo.compute_gigpo_outcome_advantage(
                tlr.clone(), step_rewards.clone(), mask, anchors, index, **kw
            )
        out[f"gigpo_{mode}"] = adv.tolist()
    if era == "2025-10":
        for std in (True, False):
            adv, _ = core_algos.compute_grpo_outcome_advantage(
                tlr.clone(), mask, index, traj, norm_adv_by_std_in_grpo=std, compute_mean_std_cross_steps=True
            )
            out[f"grpo_std_{std}"] = adv.tolist()
        adv, _ = core_algos.compute_rloo_outcome_advantage(tlr.clone(), mask, index, traj)
    else:
        adv, _ = core_algos.compute_grpo_outcome_advantage(tlr.clone(), mask, index)
        out["grpo_std_True"] = adv.tolist()
        adv, _ = core_algos.compute_rloo_outcome_advantage(tlr.clone(), mask, index)
    out["rloo"] = adv.tolist()
    return out


def reference_losses(core_algos: Any, batch: dict[str, Any], era: str) -> dict[str, Any]:
    """Actor loss (PPO-clip, k3 KL 0.01, entropy 0.001) and value loss over micro-batches of :data:`MICRO` rows,
    each micro-batch's loss divided by the accumulation steps (dp_actor.py / dp_critic.py), with gradients."""
    t = _tensors(batch)
    n = t["response_mask"].shape[0]
    splits = [list(range(i, min(i + MICRO, n))) for i in range(0, n, MICRO)]
    accum = n // MICRO  # dp_actor.py: gradient_accumulation = mini-batch // micro-batch
    modes = ["token-mean"] if era == "paper" else ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"]
    out: dict[str, Any] = {}
    for mode in modes:
        logp = t["log_prob"].clone().requires_grad_(True)
        ent = t["entropy"].clone().requires_grad_(True)
        vpred = t["values"].clone().requires_grad_(True)
        total = torch.zeros(())
        vtotal = torch.zeros(())
        for rows in splits:
            m = t["response_mask"][rows]
            if era == "paper":
                pg, _, _ = core_algos.compute_policy_loss(
                    t["old_log_prob"][rows], logp[rows], t["advantages"][rows], m, cliprange=0.2
                )
                ent_l = core_algos.verl_F.masked_mean(ent[rows], m)
                kl = core_algos.verl_F.masked_mean(
                    core_algos.kl_penalty(logp[rows], t["ref_log_prob"][rows], "low_var_kl"), m
                )
            else:
                pg, _, _, _ = core_algos.compute_policy_loss(
                    t["old_log_prob"][rows],
                    logp[rows],
                    t["advantages"][rows],
                    m,
                    cliprange=0.2,
                    clip_ratio_c=3.0,
                    loss_agg_mode=mode,
                )
                ent_l = core_algos.agg_loss(ent[rows], m, mode)
                kl = core_algos.agg_loss(
                    core_algos.kl_penalty(logp[rows], t["ref_log_prob"][rows], "low_var_kl"), m, mode
                )
            loss = (pg - 0.001 * ent_l + 0.01 * kl) / accum
            loss.backward()
            total = total + loss.detach()
            v_args = (vpred[rows], t["returns"][rows], t["old_values"][rows], m, 0.5)
            vf = (
                core_algos.compute_value_loss(*v_args)
                if era == "paper"
                else core_algos.compute_value_loss(*v_args, mode)
            )
            vf = vf[0] / accum
            vf.backward()
            vtotal = vtotal + vf.detach()
        out[mode] = {
            "actor_loss": float(total),
            "grad_log_prob": logp.grad.tolist(),
            "grad_entropy": ent.grad.tolist(),
            "value_loss": float(vtotal),
            "grad_values": vpred.grad.tolist(),
        }
    return out


ERL_COMMITS = ("20cd646",)


# -- GiGPO anchors: what verl-agent's env managers hand GiGPO, on episodes logged from our envs ------------------
def log_episodes() -> list[dict[str, Any]]:
    """Three ALFWorld and three WebShop episodes of one task each (needs ``AGENTGYM_DATA``), of equal length per
    env (verl-agent's managers step their envs in lockstep), that revisit states: expert steps, ``look``, an
    inadmissible command (``Nothing happens.``), the same search twice, a product page and back."""
    import gymnasium as gym

    import agentgym  # noqa: F401  (registers the envs)

    out = []
    env = gym.make("agentgym/ALFWorld-v0")
    plans = [["expert"] * 4, ["look", "expert", "expert", "expert"], ["jump", "expert", "jump", "expert"]]
    for e, plan in enumerate(plans):
        obs, info = env.reset(seed=0, options={"split": "valid_seen", "index": 0})
        ep = {"env": "alfworld", "episode": e, "observations": [], "admissible": [], "actions": [], "infos": []}
        for step in plan:
            act = env.unwrapped.expert_action() if step == "expert" else step
            ep["admissible"].append(list(info["admissible_actions"]))
            obs, info = _play(env, ep, obs, info, act)
        ep["final_observation"] = obs
        out.append(ep)
    env.close()
    env = gym.make("agentgym/WebShop-v0")
    for e in range(3):
        obs, info = env.reset(seed=0)
        query = " ".join(info["instruction"].split()[:4])
        ep = {"env": "webshop", "episode": e, "observations": [], "available": [], "actions": [], "infos": []}
        for t in range(3):
            avail = info["available_actions"]
            clickables = [c for c in avail["clickables"] if c not in ("back to search", "< prev", "next >")]
            if t == 0:
                act = f"search[{query if e < 2 else 'blue shirt'}]"
            elif t == 1:
                act = f"click[{clickables[0 if e < 2 else 1]}]"
            else:
                act = "click[back to search]" if e == 0 else f"click[{avail['clickables'][0]}]"
            ep["available"].append(
                {"has_search_bar": bool(avail["has_search_bar"]), "clickables": list(avail["clickables"])}
            )
            obs, info = _play(env, ep, obs, info, act)
        ep["final_observation"] = obs
        out.append(ep)
    env.close()
    return out


def _play(env: Any, ep: dict[str, Any], obs: str, info: dict[str, Any], act: str) -> tuple[str, dict[str, Any]]:
    """Log the turn (observation, agent-facing info, action) into ``ep`` and play ``act``."""
    ep["observations"].append(obs)
    ep["infos"].append(_agent_info(info))
    ep["actions"].append(act)
    obs, _, _, _, info = env.step(act)
    return obs, info


def _agent_info(info: dict[str, Any]) -> dict[str, Any]:
    """The info keys our prompt templates read (no file paths, no seeds)."""
    keys = ("admissible_actions", "available_actions", "instruction", "task")
    return json.loads(json.dumps({k: info[k] for k in keys if k in info}))


class _Replay:
    """A batched env for verl-agent's env managers that replays logged episodes in lockstep."""

    def __init__(self, episodes: list[dict[str, Any]], kind: str) -> None:
        self.eps, self.kind, self.t = episodes, kind, 0

    def _obs(self, t: int) -> list[str]:
        return [e["observations"][t] if t < len(e["observations"]) else e["final_observation"] for e in self.eps]

    def _admissible(self) -> None:
        if self.kind == "alfworld":
            n = len(self.eps[0]["admissible"])
            self.get_admissible_commands = [e["admissible"][min(self.t, n - 1)] for e in self.eps]

    def _infos(self) -> list[dict[str, Any]]:
        if self.kind == "alfworld":
            return [{} for _ in self.eps]
        n = len(self.eps[0]["available"])
        return [{"available_actions": e["available"][min(self.t, n - 1)]} for e in self.eps]

    def reset(self):
        self.t = 0
        self._admissible()
        if self.kind == "alfworld":
            return self._obs(0), None, self._infos()
        return self._obs(0), self._infos()

    def step(self, actions):
        self.t += 1
        self._admissible()
        zeros = [0.0] * len(self.eps)
        dones = [False] * len(self.eps)
        if self.kind == "alfworld":
            return self._obs(self.t), None, zeros, dones, self._infos()
        return self._obs(self.t), zeros, dones, self._infos()


def reference_anchors(checkout: Path, episodes: list[dict[str, Any]]) -> dict[str, list[list[str]]]:
    """verl-agent's ``anchor`` observations (``AlfWorldEnvironmentManager`` / ``WebshopEnvironmentManager``
    reset and step, fed the logged episodes), per episode and turn."""
    import importlib.util

    for name in ("agent_system", "agent_system.environments"):
        mod = types.ModuleType(name)
        mod.__path__ = [str(checkout / name.replace(".", "/"))]
        sys.modules[name] = mod
    import agent_system.environments.env_manager as managers

    def projection(kind: str) -> Any:
        path = checkout / "agent_system" / "environments" / "env_package" / kind / "projection.py"
        spec = importlib.util.spec_from_file_location(f"_projection_{kind}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, f"{kind}_projection")

    spec = importlib.util.spec_from_file_location("_checks", ROOT / "tests" / "conformance" / "conformance_checks.py")
    sys.path.insert(0, str(ROOT))
    checks = importlib.util.module_from_spec(spec)
    sys.modules["_checks"] = checks  # its dataclass looks its module up
    spec.loader.exec_module(checks)

    out: dict[str, Any] = {"anchors": {}, "prompt_layout": {}}
    kinds = (("alfworld", managers.AlfWorldEnvironmentManager), ("webshop", managers.WebshopEnvironmentManager))
    for kind, cls in kinds:
        eps = [e for e in episodes if e["env"] == kind]
        manager = cls(_Replay(eps, kind), projection(kind), kind)
        obs, _ = manager.reset()
        anchors = [[a] for a in obs["anchor"]]
        prompts = [[p] for p in obs["text"]]
        for t in range(len(eps[0]["actions"]) - 1):
            text = [f"<think>replay</think><action>{e['actions'][t]}</action>" for e in eps]
            obs, *_ = manager.step(text)
            for row, a in zip(anchors, obs["anchor"]):
                row.append(a)
            for row, prompt in zip(prompts, obs["text"]):
                row.append(prompt)
        out["anchors"][kind] = anchors
        # only the layout of their prompts is kept (which parts, in which order, how separated), not their text
        layouts = []
        for e, row_a, row_p in zip(eps, anchors, prompts):
            layouts.append([])
            for t, (a, prompt) in enumerate(zip(row_a, row_p)):
                if kind == "alfworld":
                    admissible = [x for x in e["admissible"][t] if x != "help"]
                else:
                    admissible = manager.format_avail_actions(e["available"][t])
                layouts[-1].append(checks.prompt_layout(prompt, e, t, shown=a, admissible=admissible))
        out["prompt_layout"][kind] = layouts
    return out


def write_anchors(checkout: Path, short: str, out: Path) -> int:
    episodes = log_episodes()
    fixture = {
        **header(
            "langfengQ/verl-agent",
            short,
            [
                "agent_system/environments/env_manager.py: AlfWorldEnvironmentManager, WebshopEnvironmentManager "
                "(reset/step 'anchor', the observation GiGPO groups steps by; 'text', the prompt, of which only the "
                "layout is kept: tests/conformance/conformance_checks.py prompt_layout)"
            ],
        ),
        "generated_by": f"python tools/conformance_golden.py --anchors --checkout DIR --commit {short}",
        "inputs": {"episodes": episodes},
        "expected": reference_anchors(checkout, episodes),
    }
    return write_fixture(out / f"anchors_verl_agent_{short}.json", fixture)


def header(repo: str, commit: str, functions: list[str]) -> dict[str, Any]:
    """The fixture's format tag and the reference it was produced by."""
    return {"format": FORMAT, "reference": {"repo": repo, "commit": commit, "functions": functions}}


def write_fixture(path: Path, fixture: dict[str, Any]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


def load_functions(path: Path, names: list[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """The top-level functions ``names`` of the Python file ``path``, defined in ``namespace`` (decorators dropped)."""
    import ast

    tree = ast.parse(path.read_text())
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in found}
    if missing:
        raise SystemExit(f"{path} has no function(s) {sorted(missing)}")
    for node in found:
        node.decorator_list = []
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)
    return {n: namespace[n] for n in names}


def erl_batch() -> dict[str, Any]:
    """Distillation rows: second-attempt returns (successes, a failure, HotpotQA-style partial F1, a penalised
    failure) with padded responses and log-probs."""
    returns = [1.0, 0.0, 0.4, -0.1, 1.0, 0.75]
    lengths = [3, 6, 1, 4, 5, 2]
    g = torch.Generator().manual_seed(2602)
    mask = torch.zeros(len(returns), T)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    logp = -torch.rand(len(returns), T, generator=g) * 2.0 - 0.05
    return {"second_return": returns, "tensors": {"response_mask": mask.tolist(), "log_prob": logp.tolist()}}


def reference_erl(checkout: Path, batch: dict[str, Any]) -> dict[str, Any]:
    """RAFT advantages of the distilled rows and the gradient of their PPO loss at ratio 1 (old = new log-probs)."""
    root = checkout / "verl"
    for name in ("verl", "verl.utils"):
        mod = types.ModuleType(name)
        mod.__path__ = [str(root / name.replace(".", "/"))]
        sys.modules[name] = mod
    import verl.utils.torch_functional as verl_f

    class _Config(dict):
        __getattr__ = dict.get

    ns: dict[str, Any] = {"torch": torch, "np": np, "Optional": None, "Any": Any, "verl_F": verl_f}
    ns.update(DictConfig=_Config, AlgoConfig=type("AlgoConfig", (), {}))
    ns["Optional"] = __import__("typing").Optional
    fns = load_functions(
        root / "verl" / "trainer" / "ppo" / "core_algos.py",
        ["compute_raft_outcome_advantage", "agg_loss", "compute_policy_loss_vanilla"],
        ns,
    )
    t = _tensors(batch)
    mask = t["response_mask"]
    tlr = torch.zeros_like(mask)
    for i, n in enumerate(mask.sum(-1).long().tolist()):
        tlr[i, n - 1] = batch["second_return"][i]
    adv, _ = fns["compute_raft_outcome_advantage"](tlr, mask)
    logp = t["log_prob"].clone().requires_grad_(True)
    cfg = _Config(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0)
    loss, _ = fns["compute_policy_loss_vanilla"](
        t["log_prob"].clone(), logp, adv, mask, loss_agg_mode="seq-mean-token-sum", config=cfg
    )
    loss.backward()
    return {"raft_advantages": adv.tolist(), "distill_loss": float(loss.detach()), "grad_log_prob": logp.grad.tolist()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", choices=("verl-agent", "experiential_rl"), default="verl-agent")
    p.add_argument(
        "--anchors",
        action="store_true",
        help="log ALFWorld/WebShop episodes (AGENTGYM_DATA) and write verl-agent's GiGPO anchors for them",
    )
    p.add_argument("--checkout", type=Path, required=True, help="the reference's source tree at --commit")
    p.add_argument("--commit", required=True, help="the commit the checkout is (short or full hash)")
    p.add_argument("--out", type=Path, default=Path("tests/conformance/fixtures"))
    a = p.parse_args(argv)
    short = a.commit[:7]
    if a.repo == "experiential_rl":
        return write_erl(a.checkout, short, a.out)
    if a.anchors:
        return write_anchors(a.checkout, short, a.out)
    if short not in ERAS:
        raise SystemExit(f"unknown verl-agent commit {a.commit!r}: the pinned ones are {', '.join(ERAS)}")
    if not (a.checkout / "gigpo" / "core_gigpo.py").exists():
        raise SystemExit(f"{a.checkout} has no gigpo/core_gigpo.py: pass a verl-agent source tree")
    core_algos, core_gigpo = load_reference(a.checkout)
    batch = canned_batch()
    era = ERAS[short]
    fixture = {
        **header(
            "langfengQ/verl-agent",
            short,
            [
                "gigpo/core_gigpo.py: compute_step_discounted_returns, compute_gigpo_outcome_advantage",
                "verl/trainer/ppo/core_algos.py: compute_grpo_outcome_advantage, compute_rloo_outcome_advantage, "
                "compute_policy_loss, kl_penalty(low_var_kl), compute_value_loss"
                + (", agg_loss" if era == "2025-10" else ", verl_F.masked_mean"),
            ],
        ),
        "settings": {
            "gamma": GAMMA,
            "invalid_penalty": PENALTY,
            "micro_batch_rows": MICRO,
            "epsilon": 0.2,
            "clip_ratio_c": 3.0 if era == "2025-10" else None,
            "beta": 0.01,
            "entropy_coef": 0.001,
            "value_clip": 0.5,
        },
        "generated_by": "python tools/conformance_golden.py --checkout DIR --commit " + short,
        "torch": torch.__version__,
        "inputs": batch,
        "expected": {
            "advantages": reference_advantages(core_algos, core_gigpo, batch, era),
            "losses": reference_losses(core_algos, batch, era),
        },
    }
    return write_fixture(a.out / f"verl_agent_{short}.json", fixture)


def write_erl(checkout: Path, short: str, out: Path) -> int:
    if short not in ERL_COMMITS:
        raise SystemExit(f"unknown experiential_rl commit {short!r}: the pinned one is {', '.join(ERL_COMMITS)}")
    if not (checkout / "verl" / "verl" / "trainer" / "ppo" / "core_algos.py").exists():
        raise SystemExit(f"{checkout} has no verl/verl/trainer/ppo/core_algos.py: pass an experiential_rl tree")
    batch = erl_batch()
    fixture = {
        **header(
            "microsoft/experiential_rl",
            short,
            [
                "verl/verl/trainer/ppo/core_algos.py: compute_raft_outcome_advantage, compute_policy_loss_vanilla "
                "(loss_agg_mode seq-mean-token-sum, at ratio 1), agg_loss",
                "examples/erl_*/erl_*_flow.py: distilled second attempts tagged with the raft advantage estimator",
            ],
        ),
        "settings": {"loss_agg_mode": "seq-mean-token-sum", "epsilon": 0.2, "clip_ratio_c": 3.0},
        "generated_by": f"python tools/conformance_golden.py --repo experiential_rl --checkout DIR --commit {short}",
        "torch": torch.__version__,
        "inputs": batch,
        "expected": reference_erl(checkout, batch),
    }
    return write_fixture(out / f"experiential_rl_{short}.json", fixture)


if __name__ == "__main__":
    sys.exit(main())
