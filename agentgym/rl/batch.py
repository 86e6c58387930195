"""Turn rows to padded tensors: every turn of every episode is one training row (prompt + response).

Layout (what :func:`agentgym.rl.logprobs.forward_completion` expects): the prompt is left-padded to the
batch's longest prompt ``P`` and the response right-padded to the longest response ``T``, so all responses
start at column ``P``. ``completion_mask`` is 1 on real response tokens only (the prompt never trains).
Per-turn metadata (episode, group, turn index, reward, done flags, observation) rides along in
``TurnBatch.meta`` for the advantage functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class TurnBatch:
    """Padded tensors of a set of turns plus their per-row metadata.

    Attributes:
        tensors: ``input_ids``, ``attention_mask`` ``(B, P+T)``; ``completion_mask``, ``advantages``,
            ``old_per_token_logps``, ``ref_per_token_logps`` ``(B, T)``; algorithms add their own
            (``returns``, ``values``, ``readout``...).
        meta: one dict per row: ``group``, ``episode``, ``t``, ``reward`` (shaped), ``done``, ``terminated``,
            ``valid``, ``observation``.
        completion_length: ``T``.
    """

    tensors: dict[str, torch.Tensor]
    meta: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.tensors["input_ids"].shape[0])

    @property
    def completion_length(self) -> int:
        return int(self.tensors["completion_mask"].shape[1])

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        self.tensors[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self.tensors

    def to(self, device: Any) -> TurnBatch:
        return TurnBatch({k: v.to(device) for k, v in self.tensors.items()}, self.meta)

    def select(self, rows: Sequence[int] | torch.Tensor) -> TurnBatch:
        """A sub-batch of ``rows``, with all-padding columns trimmed (fewer FLOPs per micro-batch)."""
        idx = torch.as_tensor(list(rows) if not isinstance(rows, torch.Tensor) else rows, dtype=torch.long)
        sub = {k: v[idx.to(v.device)] for k, v in self.tensors.items()}
        T = sub["completion_mask"].shape[1]
        P = sub["input_ids"].shape[1] - T
        lead = int((sub["attention_mask"][:, :P].sum(0) == 0).sum())  # left columns padded in every row
        keep_t = max(1, int(sub["completion_mask"].sum(1).max()))
        out = {}
        for k, v in sub.items():
            if v.dim() >= 2 and v.shape[1] == P + T:
                out[k] = v[:, lead : P + keep_t]
            elif v.dim() >= 2 and v.shape[1] == T:
                out[k] = v[:, :keep_t]
            elif v.dim() >= 2 and v.shape[1] == T + 1:  # per-column read-outs (state end + response)
                out[k] = v[:, : keep_t + 1]
            else:
                out[k] = v
        return TurnBatch(out, [self.meta[i] for i in idx.tolist()] if self.meta else [])


def build_batch(
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    pad_id: int,
    old_logprobs: Sequence[Sequence[float] | None] | None = None,
    meta: list[dict[str, Any]] | None = None,
) -> TurnBatch:
    """Pad turn rows into a :class:`TurnBatch`.

    Args:
        prompts: prompt token ids per row.
        responses: response token ids per row (an empty response becomes one masked pad token).
        pad_id: the tokenizer's pad id.
        old_logprobs: sampling-time log-probs per row (stored as ``sampling_per_token_logps`` when all given).
        meta: per-row metadata kept alongside.

    Raises:
        ValueError: on an empty batch, mismatched lengths or an empty prompt.
    """
    if not prompts:
        raise ValueError("no turns to train on: the rollout returned an empty batch")
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("a turn has an empty prompt; every row needs at least one prompt token")
    B = len(prompts)
    P = max(len(p) for p in prompts)
    T = max(1, max(len(r) for r in responses))
    input_ids = torch.full((B, P + T), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((B, P + T), dtype=torch.long)
    completion_mask = torch.zeros((B, T), dtype=torch.float32)
    have_lp = old_logprobs is not None and all(lp is not None for lp in old_logprobs)
    sampling = torch.zeros((B, T), dtype=torch.float32) if have_lp else None
    for i, (p, r) in enumerate(zip(prompts, responses)):
        input_ids[i, P - len(p) : P] = torch.tensor(list(p), dtype=torch.long)
        attention_mask[i, P - len(p) : P] = 1
        if r:
            input_ids[i, P : P + len(r)] = torch.tensor(list(r), dtype=torch.long)
            attention_mask[i, P : P + len(r)] = 1
            completion_mask[i, : len(r)] = 1.0
        if sampling is not None:
            lp = list(old_logprobs[i])[: len(r)]
            sampling[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
    tensors = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "completion_mask": completion_mask,
        "advantages": torch.zeros((B, T), dtype=torch.float32),
    }
    if sampling is not None:
        tensors["sampling_per_token_logps"] = sampling
    return TurnBatch(tensors, list(meta) if meta is not None else [{} for _ in range(B)])


def turn_meta(turn: Any, reward: float, **extra: Any) -> dict[str, Any]:
    """The metadata row of a rollout turn (``agentgym.rl.rollout.Turn``) that rides in ``TurnBatch.meta``.

    Args:
        turn: the turn (its ``group``, ``episode``, ``t``, done flags, validity and observation are copied).
        reward: its shaped training reward.
        extra: further keys, or overrides (ERL regroups its second attempts by task: ``group=...``).
    """
    return {
        "group": turn.group,
        "episode": turn.episode,
        "t": turn.t,
        "reward": reward,
        "done": turn.done,
        "terminated": turn.terminated,
        "truncated": turn.truncated,
        "valid": bool(turn.format_valid and turn.is_action_valid),
        "observation": turn.observation,
        **extra,
    }


def broadcast_turn_values(values: Sequence[float], completion_mask: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` tensor holding each row's scalar on its response tokens (0 elsewhere)."""
    v = torch.as_tensor(list(values), dtype=torch.float32, device=completion_mask.device)
    return v[:, None] * completion_mask.to(torch.float32)  # (B, T)


def episode_groups(meta: list[dict[str, Any]]) -> dict[int, list[int]]:
    """``episode -> row indices in turn order`` from batch metadata."""
    out: dict[int, list[int]] = {}
    for i, m in enumerate(meta):
        out.setdefault(int(m["episode"]), []).append(i)
    for rows in out.values():
        rows.sort(key=lambda i: int(meta[i]["t"]))
    return out
