"""The conformance comparisons: our functions against verl-agent's golden values and the verl package.

Each check returns :class:`Check` rows (quantity, our function, reference, max |diff|); the tests assert them
and ``tools/conformance_report.py`` renders them into docs/conformance.md.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from agentgym.rl.advantages import group_normalize
from agentgym.rl.losses import clipped_value_loss, loss_counts
from agentgym.rl.rewards import step_row_scores
from baselines.gigpo import gigpo_advantages, step_returns
from baselines.grpo import policy_loss
from baselines.rloo import rloo_row_advantages

FIXTURES = Path(__file__).parent / "fixtures"
TOL = 1e-6
VERL_AGENT = {"f974dc5": "paper", "d0b9724": "2025-10"}


@dataclass
class Check:
    quantity: str
    ours: str
    reference: str
    max_diff: float


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def tensors(fx: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, dtype=torch.float32) for k, v in fx["inputs"]["tensors"].items()}


def max_diff(a: Any, b: Any, mask: torch.Tensor | None = None) -> float:
    a, b = (torch.as_tensor(x.detach() if isinstance(x, torch.Tensor) else x, dtype=torch.float64) for x in (a, b))
    d = (a - b).abs()
    if mask is not None:
        d = d * mask.to(d.dtype)
    return float(d.max()) if d.numel() else 0.0


# -- the fixture's rows as our trainer's batch metadata -------------------------------------------------------
def fixture_meta(fx: dict[str, Any], penalty_on: str = "format") -> list[dict[str, Any]]:
    """Turn-row metadata as :meth:`Trainer.make_batch` writes it (shaped reward = env reward - penalty)."""
    pen = fx["settings"]["invalid_penalty"]
    meta = []
    for r in fx["inputs"]["rows"]:
        p = pen if not r["format_valid"] else 0.0
        meta.append(
            {
                "group": r["group"],
                "episode": r["episode"],
                "t": r["t"],
                "reward": r["env_reward"] - p,
                "valid": r["format_valid"],
                "penalty": p,
                "observation": r["anchor"],
            }
        )
    return meta


def per_token(values: Any, mask: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(values, dtype=torch.float32).unsqueeze(-1) * mask


def our_advantages(fx: dict[str, Any], *, step_return: str = "verl-agent") -> dict[str, torch.Tensor]:
    """Our GiGPO / GRPO / RLOO advantages per row (reference mode unless ``step_return`` says otherwise)."""
    s = fx["settings"]
    meta = fixture_meta(fx)
    groups = [m["group"] for m in meta]
    scores = torch.tensor(step_row_scores(meta, s["invalid_penalty"]))
    steps = torch.tensor(step_returns(meta, s["gamma"], s["invalid_penalty"], step_return))
    out = {"step_rewards": steps}
    for mode in ("mean_std_norm", "mean_norm"):
        joint, _, _ = gigpo_advantages(scores, steps, groups, [m["observation"] for m in meta], mode=mode)
        out[f"gigpo_{mode}"] = joint
    out["grpo_std_True"] = group_normalize(scores, groups, norm_by_std=True)
    out["grpo_std_False"] = group_normalize(scores, groups, norm_by_std=False)
    out["rloo"] = rloo_row_advantages(scores, groups)
    return out


# -- losses over micro-batches -------------------------------------------------------------------------------
class StandIn:
    """What :func:`baselines.grpo.policy_loss` needs of a trainer: ``args`` and a forward whose outputs are
    rows of leaf tensors, so the gradients land on the log-probs and entropies themselves."""

    def __init__(self, args: Any, logp: torch.Tensor, entropy: torch.Tensor) -> None:
        self.args, self.logp, self.entropy = args, logp, entropy

    def forward(self, mb: dict, *, want_entropy: bool = False, **_: Any) -> dict[str, torch.Tensor]:
        return {"per_token_logps": self.logp[mb["rows"]], "entropy": self.entropy[mb["rows"]]}


def actor_args(**kw: Any) -> SimpleNamespace:
    base = dict(epsilon_low=0.2, epsilon_high=0.2, clip_ratio_c=None, beta=0.01, entropy_coef=0.001)
    base.update(loss_agg_mode="token-mean", loss_norm="mini-batch", value_clip=0.5, value_loss_factor=0.5)
    base.update(kw)
    return SimpleNamespace(**base)


def splits(n: int, micro: int) -> list[list[int]]:
    return [list(range(i, min(i + micro, n))) for i in range(0, n, micro)]


def our_losses(t: dict[str, torch.Tensor], args: Any, micro: int) -> dict[str, Any]:
    """Our actor and value losses over one mini-batch (all rows, in order) in micro-batches of ``micro`` rows,
    each normalised by :func:`agentgym.rl.losses.loss_counts` as :meth:`Trainer.update` does, with gradients."""
    logp = t["log_prob"].clone().requires_grad_(True)
    ent = t["entropy"].clone().requires_grad_(True)
    vpred = t["values"].clone().requires_grad_(True)
    trainer = StandIn(args, logp, ent)
    parts = splits(logp.shape[0], micro)
    actor = value = 0.0
    for rows in parts:
        mask = t["response_mask"][rows]
        mb = {
            "rows": rows,
            "completion_mask": mask,
            "old_per_token_logps": t["old_log_prob"][rows],
            "ref_per_token_logps": t["ref_log_prob"][rows],
            "advantages": t["advantages"][rows],
        }
        n_tokens, n_rows = loss_counts(t["response_mask"], mask, len(parts), args.loss_norm)
        loss, _ = policy_loss(trainer, mb, n_tokens, n_rows)
        loss.backward()
        actor += float(loss.detach())
        vl, _ = clipped_value_loss(
            vpred[rows],
            t["old_values"][rows],
            t["returns"][rows],
            mask,
            clip=args.value_clip,
            normalizer=n_tokens if args.loss_agg_mode == "token-mean" else n_rows,
            factor=args.value_loss_factor,
            loss_agg_mode=args.loss_agg_mode,
        )
        vl.backward()
        value += float(vl.detach())
    return {
        "actor_loss": actor,
        "grad_log_prob": logp.grad,
        "grad_entropy": ent.grad,
        "value_loss": value,
        "grad_values": vpred.grad,
    }


def reference_args(fx: dict[str, Any], mode: str) -> SimpleNamespace:
    """Our settings in the fixture's reference mode (its commit's dual clip and value-loss factor)."""
    s = fx["settings"]
    era = VERL_AGENT[fx["reference"]["commit"]]
    return actor_args(
        clip_ratio_c=s["clip_ratio_c"],
        loss_agg_mode=mode,
        loss_norm="micro-batch",
        value_loss_factor=0.5 if era == "paper" else 1.0,
    )


def verl_agent_checks(commit: str) -> list[Check]:
    """Every quantity of the verl-agent fixture at ``commit``, ours in the reference mode."""
    fx = load_fixture(f"verl_agent_{commit}.json")
    ref = f"verl-agent {commit}"
    t = tensors(fx)
    mask = t["response_mask"]
    exp = fx["expected"]
    ours = our_advantages(fx)
    out = [
        Check("GiGPO step return (gamma 0.95, penalty)", "baselines.gigpo.step_returns", ref,
              max_diff(ours["step_rewards"], exp["advantages"]["step_rewards"])),
        Check("GiGPO advantage, w/ std", "baselines.gigpo.gigpo_advantages", ref,
              max_diff(per_token(ours["gigpo_mean_std_norm"], mask), exp["advantages"]["gigpo_mean_std_norm"])),
        Check("GiGPO advantage, w/o std", "baselines.gigpo.gigpo_advantages", ref,
              max_diff(per_token(ours["gigpo_mean_norm"], mask), exp["advantages"]["gigpo_mean_norm"])),
        Check("GRPO row advantage, w/ std", "agentgym.rl.advantages.group_normalize", ref,
              max_diff(per_token(ours["grpo_std_True"], mask), exp["advantages"]["grpo_std_True"])),
        Check("RLOO row advantage", "baselines.rloo.rloo_row_advantages", ref,
              max_diff(per_token(ours["rloo"], mask), exp["advantages"]["rloo"])),
    ]  # fmt: skip
    if "grpo_std_False" in exp["advantages"]:
        out.append(Check("GRPO row advantage, w/o std", "agentgym.rl.advantages.group_normalize", ref,
                         max_diff(per_token(ours["grpo_std_False"], mask), exp["advantages"]["grpo_std_False"])))  # fmt: skip
    micro = fx["settings"]["micro_batch_rows"]
    for mode, e in exp["losses"].items():
        got = our_losses(t, reference_args(fx, mode), micro)
        tag = f"{mode}, per micro-batch"
        out += [
            Check(f"actor loss (PPO-clip + k3 KL + entropy), {tag}", "baselines.grpo.policy_loss", ref,
                  abs(got["actor_loss"] - e["actor_loss"])),
            Check(f"actor loss gradient wrt log-probs, {tag}", "baselines.grpo.policy_loss", ref,
                  max_diff(got["grad_log_prob"], e["grad_log_prob"])),
            Check(f"actor loss gradient wrt entropy, {tag}", "baselines.grpo.policy_loss", ref,
                  max_diff(got["grad_entropy"], e["grad_entropy"])),
            Check(f"value loss, {tag}", "agentgym.rl.losses.clipped_value_loss", ref,
                  abs(got["value_loss"] - e["value_loss"])),
            Check(f"value loss gradient, {tag}", "agentgym.rl.losses.clipped_value_loss", ref,
                  max_diff(got["grad_values"], e["grad_values"])),
        ]  # fmt: skip
    return out


# -- against the verl package itself -------------------------------------------------------------------------
VERL_VERSION = "0.9.1"


VERL_DIR = Path(__file__).resolve().parents[2] / ".verl-ref"


def import_verl() -> tuple[Any, Any]:
    """verl's ``core_algos`` and ``torch_functional`` from ``.verl-ref/``, where ``make setup`` installs verl and the
    few modules they import (tests/conformance/requirements-verl.txt), outside the venv."""
    if str(VERL_DIR) not in sys.path:
        sys.path.append(str(VERL_DIR))
    try:
        import verl
        import verl.trainer.ppo.core_algos as core_algos
        import verl.utils.torch_functional as verl_f
    except ImportError as e:  # pragma: no cover - a setup problem, said plainly
        raise RuntimeError(
            f"the conformance suite needs verl {VERL_VERSION} in {VERL_DIR}: run `make setup` ({e})"
        ) from e
    if verl.__version__ != VERL_VERSION:
        raise RuntimeError(f"verl {verl.__version__} is installed, the suite pins {VERL_VERSION}: run `make setup`")
    return core_algos, verl_f


class _ActorConfig(SimpleNamespace):
    """The fields of verl's ``ActorConfig`` that ``compute_policy_loss_vanilla`` reads."""

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


def episode_token_rewards(fx: dict[str, Any], mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` verl-style token rewards: each row's score (episode reward - its penalty) on its last token."""
    scores = step_row_scores(fixture_meta(fx), fx["settings"]["invalid_penalty"])
    out = torch.zeros_like(mask)
    for i, n in enumerate(mask.sum(-1).long().tolist()):
        out[i, n - 1] = scores[i]
    return out


def _loss_and_grad(fn: Any, x: torch.Tensor) -> tuple[float, torch.Tensor]:
    """``fn(x)[0]`` (a loss) and its gradient with respect to ``x``."""
    leaf = x.clone().requires_grad_(True)
    loss = fn(leaf)[0]
    loss.backward()
    return float(loss.detach()), leaf.grad


def verl_checks() -> list[Check]:
    """GRPO, RLOO, GAE, PPO-clip (dual clip, every loss_agg_mode), k3 KL, value loss and entropy against the
    verl package on the canned batch of the verl-agent fixture (forward values and gradients)."""
    import numpy as np

    from agentgym.rl.logprobs import entropy_from_logits
    from agentgym.rl.losses import low_var_kl, ppo_clip_loss
    from baselines.ppo import masked_whiten, token_gae

    core, verl_f = import_verl()
    ref = f"verl {VERL_VERSION}"
    fx = load_fixture("verl_agent_d0b9724.json")
    t = tensors(fx)
    mask = t["response_mask"]
    meta = fixture_meta(fx)
    groups = [m["group"] for m in meta]
    index = np.array([str(g) for g in groups], dtype=object)
    tlr = episode_token_rewards(fx, mask)
    scores = tlr.sum(-1)
    out: list[Check] = []
    for std in (True, False):
        a, _ = core.compute_grpo_outcome_advantage(tlr, mask, index, norm_adv_by_std_in_grpo=std)
        ours = per_token(group_normalize(scores, groups, norm_by_std=std), mask)
        out.append(Check(f"GRPO advantage, {'w/' if std else 'w/o'} std", "agentgym.rl.advantages.group_normalize",
                         ref, max_diff(ours, a)))  # fmt: skip
    a, _ = core.compute_rloo_outcome_advantage(tlr, mask, index)
    out.append(Check("RLOO advantage", "baselines.rloo.rloo_row_advantages", ref,
                     max_diff(per_token(rloo_row_advantages(scores, groups), mask), a)))  # fmt: skip
    values = t["values"] * mask
    for gamma, lam in ((1.0, 1.0), (0.99, 0.95)):
        a, r = core.compute_gae_advantage_return(tlr, values, mask, gamma, lam)
        adv, ret = torch.zeros_like(mask), torch.zeros_like(mask)
        for i, n in enumerate(mask.sum(-1).long().tolist()):
            adv[i, :n], ret[i, :n] = token_gae(tlr[i, :n], values[i, :n], gamma, lam)
        label = "table setting" if gamma == 1.0 else f"gamma {gamma}, lambda {lam}"
        out.append(Check(f"GAE advantage, whitened ({label})", "baselines.ppo.token_gae + masked_whiten", ref,
                         max_diff(masked_whiten(adv, mask), a, mask)))  # fmt: skip
        out.append(Check(f"GAE return ({label})", "baselines.ppo.token_gae", ref, max_diff(ret, r, mask)))
    cfg = _ActorConfig(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, global_batch_info={})
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        pairs = (
            ("PPO-clip + dual clip", "agentgym.rl.losses.ppo_clip_loss", "log_prob",
             lambda x, m=mode: core.compute_policy_loss_vanilla(t["old_log_prob"], x, t["advantages"], mask, m, cfg),
             lambda x, m=mode: ppo_clip_loss(x, t["old_log_prob"], t["advantages"], mask, clip_ratio_c=3.0,
                                             loss_agg_mode=m)),
            ("value loss (clipped)", "agentgym.rl.losses.clipped_value_loss", "values",
             lambda x, m=mode: core.compute_value_loss(x, t["returns"], t["old_values"], mask, 0.5, m),
             lambda x, m=mode: clipped_value_loss(x, t["old_values"], t["returns"], mask, clip=0.5, loss_agg_mode=m)),
        )  # fmt: skip
        for name, ours_fn, key, theirs, ours in pairs:
            (loss_ref, grad_ref), (loss, grad) = (_loss_and_grad(f, t[key]) for f in (theirs, ours))
            out.append(Check(f"{name}, {mode}", ours_fn, ref, abs(loss - loss_ref)))
            out.append(Check(f"{name} gradient, {mode}", ours_fn, ref, max_diff(grad, grad_ref)))
    lp_ref = t["log_prob"].clone().requires_grad_(True)
    k_ref = core.kl_penalty(lp_ref, t["ref_log_prob"], "low_var_kl")
    (k_ref * mask).sum().backward()
    lp = t["log_prob"].clone().requires_grad_(True)
    k = low_var_kl(lp, t["ref_log_prob"])
    (k * mask).sum().backward()
    out.append(Check("k3 (low_var_kl) KL per token", "agentgym.rl.losses.low_var_kl", ref, max_diff(k, k_ref)))
    out.append(Check("k3 KL gradient", "agentgym.rl.losses.low_var_kl", ref, max_diff(lp.grad, lp_ref.grad)))
    logits = torch.randn(4, 7, 50, generator=torch.Generator().manual_seed(7)) * 3.0
    l_ref = logits.clone().requires_grad_(True)
    verl_f.entropy_from_logits(l_ref).sum().backward()
    lg = logits.clone().requires_grad_(True)
    entropy_from_logits(lg, chunk_size=5).sum().backward()
    out.append(Check("entropy from logits", "agentgym.rl.logprobs.entropy_from_logits", ref,
                     max_diff(entropy_from_logits(logits), verl_f.entropy_from_logits(logits))))  # fmt: skip
    out.append(Check("entropy gradient", "agentgym.rl.logprobs.entropy_from_logits", ref,
                     max_diff(lg.grad, l_ref.grad)))  # fmt: skip
    return out


ERL_COMMIT = "20cd646"


def erl_checks() -> list[Check]:
    """ERL's consolidation term against microsoft/experiential_rl: the ``raft`` weight and the gradient of our
    distillation NLL against that of their PPO loss on distilled rows at ratio 1 (seq-mean-token-sum)."""
    from baselines.erl import consolidation_loss, consolidation_weight

    fx = load_fixture(f"experiential_rl_{ERL_COMMIT}.json")
    ref = f"experiential_rl {ERL_COMMIT}"
    t = tensors(fx)
    mask = t["response_mask"]
    w = torch.tensor([consolidation_weight(r, "raft") for r in fx["inputs"]["second_return"]])
    logp = t["log_prob"].clone().requires_grad_(True)
    consolidation_loss(logp, mask, w, normalizer=float(mask.shape[0])).backward()
    exp = fx["expected"]
    return [
        Check("ERL consolidation weight (raft)", "baselines.erl.consolidation_weight", ref,
              max_diff(per_token(w, mask), exp["raft_advantages"])),
        Check("ERL consolidation loss gradient (seq-mean-token-sum)", "baselines.erl.consolidation_loss", ref,
              max_diff(logp.grad, exp["grad_log_prob"])),
    ]  # fmt: skip


def all_checks(*, with_verl: bool = True) -> list[Check]:
    """Every check, in the docs page's order (``with_verl=False`` leaves out the verl package's)."""
    verl = verl_checks() if with_verl else []
    return [c for commit in VERL_AGENT for c in verl_agent_checks(commit)] + verl + erl_checks()


# -- prompt layout (what the rollout feeds the policy) --------------------------------------------------------
def prompt_layout(text: str, episode: dict[str, Any], t: int, *, shown: str, admissible: list[str]) -> dict[str, Any]:
    """The layout of one turn's prompt, with none of its prose: the history steps it shows (``Action k:``), how
    often the task sentence appears, which form of the current observation it shows (the env's ``raw`` text or
    ``shown``, the reference's anchor), the separator between admissible actions, and the order of the parts."""
    info = episode["infos"][t]
    task = (info.get("task") or info.get("instruction") or "").strip().rstrip(".")
    raw = episode["observations"][t].strip()
    if raw in text:
        form, cur = "raw", text.find(raw)
    elif shown.strip() in text:
        form, cur = "reference", text.find(shown.strip())
    else:
        form, cur = "missing", -1
    quoted = [f"'{a}'" for a in admissible]
    first = text.find(quoted[0]) if quoted else -1
    second = text.find(quoted[1], first + len(quoted[0])) if len(quoted) > 1 and first >= 0 else -1
    separator = text[first + len(quoted[0]) : second] if second >= 0 else None
    hist = re.search(r"Observation \d+: ", text)
    parts = {"history": hist.start() if hist else -1, "observation": cur, "admissible": first}
    return {
        "history_steps": [int(k) for k in re.findall(r"Action (\d+): '", text)],
        "task_mentions": text.count(task) if task else 0,
        "observation_form": form,
        "admissible_separator": separator,
        "order": [k for k, v in sorted(parts.items(), key=lambda kv: kv[1]) if v >= 0],
    }


def our_prompt_layouts(episode: dict[str, Any], env_id: str, shown: list[str]) -> list[dict[str, Any]]:
    """:func:`prompt_layout` of our prompt (the table configs' template, history 2) at each turn of ``episode``."""
    from agentgym.agent_io import AgentInput
    from agentgym.prompts import get_template

    template = get_template(env_id)
    out = []
    obs, acts = episode["observations"], episode["actions"]
    for t in range(len(obs)):
        inp = AgentInput(
            env_id=env_id,
            observation=obs[t],
            info=episode["infos"][t],
            first_observation=obs[0],
            history=list(zip(obs[:t], acts[:t])),
        )
        text = "\n".join(m["content"] for m in template.build(inp, history_length=2))
        admissible = [a for a in episode["infos"][t].get("admissible_actions", []) if a != "help"]
        out.append(prompt_layout(text, episode, t, shown=shown[t], admissible=admissible))
    return out
