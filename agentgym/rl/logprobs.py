"""Per-token log-probabilities and entropies of completions, computed in chunks.

A full ``(B, T, V)`` log-softmax of a 150k-vocabulary model is gigabytes (4 x 512 x 151k fp32 = 1.2 GB),
so :func:`forward_completion` runs the decoder once, then applies the output head to chunks of
``chunk_size`` positions at a time and keeps only what training needs per position: the log-prob of the
taken token, optionally the entropy, and optionally the raw logits of a few read-out ids (SAPO's w+/w-).
With gradients on, each chunk is wrapped in activation checkpointing so its ``(chunk, V)`` logits are
recomputed in backward instead of stored: memory stays O(B*T) plus one chunk.

Layout assumed (built by :mod:`agentgym.rl.batch`): prompts are left-padded so every response starts at
the same column ``P = input_ids.shape[1] - T``; ``completion_mask`` is ``(B, T)`` over response tokens.
Logits at position ``i`` predict token ``i + 1``, so the response tokens are scored by the logits at
columns ``P-1 .. P+T-2``; column ``P-1`` is also the last token of the state (prompt) part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counted over real tokens only (what ``generate`` uses with left padding)."""
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.clamp(min=0)


def _backbone_and_head(model: Any) -> tuple[Any, Any]:
    inner = getattr(model, "module", model)  # unwrap a DDP-style wrapper if one is passed
    if hasattr(inner, "get_base_model"):  # a peft (LoRA) model: the causal LM with the adapter layers injected
        inner = inner.get_base_model()
    prefix = getattr(inner, "base_model_prefix", "model")
    backbone = getattr(inner, prefix, None)
    head = inner.get_output_embeddings()
    if backbone is None or head is None:
        raise TypeError(f"{type(inner).__name__} is not a causal LM with a decoder and an output head")
    return backbone, head


def _masked_logits(logits: torch.Tensor, temperature: float, exclude: torch.Tensor | None) -> torch.Tensor:
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    if exclude is not None:
        logits = logits.index_fill(-1, exclude, float("-inf"))
    return logits


def _entropy(logits: torch.Tensor, logz: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(logits, dim=-1)
    if not torch.isinf(logits).any():
        return logz - (p * logits).sum(-1)
    # Excluded ids have p = 0 and logit -inf: zero their logits (not the product) so neither the value
    # nor the gradient sees 0 * inf.
    finite = logits.masked_fill(torch.isinf(logits), 0.0)
    return logz - (p * finite).sum(-1)


def _chunk_stats(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    temperature: float,
    exclude: torch.Tensor | None,
    readout: torch.Tensor | None,
    want_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    raw = F.linear(hidden, weight, bias)  # (N, V)
    logits = _masked_logits(raw, temperature, exclude)
    logz = torch.logsumexp(logits, dim=-1)  # (N,)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1) - logz  # (N,)
    # A padded position may target an excluded id (-inf); keep it finite so masked sums stay finite.
    logp = torch.where(torch.isfinite(logp), logp, torch.full_like(logp, -1e4))
    if want_entropy:
        ent = _entropy(logits, logz)
    else:
        ent = logp.new_zeros(logp.shape)
    ro = raw.float().index_select(-1, readout) if readout is not None else logp.new_zeros((logp.shape[0], 0))
    return logp, ent, ro


def forward_completion(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    completion_length: int,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    exclude_token_ids: Sequence[int] | torch.Tensor | None = None,
    readout_token_ids: Sequence[int] | None = None,
    want_entropy: bool = False,
) -> dict[str, torch.Tensor]:
    """One forward pass over prompt+response rows; per-token statistics of the last ``completion_length`` tokens.

    Args:
        model: a transformers causal LM (``base_model_prefix`` backbone + ``get_output_embeddings`` head).
        input_ids: ``(B, P+T)`` left-padded prompt followed by the right-padded response.
        attention_mask: ``(B, P+T)``.
        completion_length: ``T``.
        temperature: logits are divided by it before the softmax (the sampling temperature).
        chunk_size: positions per output-head chunk (memory ~ chunk_size x V floats).
        exclude_token_ids: ids removed from the softmax (logit -inf) in log-probs and entropy (SAPO's w+/w-,
            or any ids suppressed at sampling time, so ratios start at 1).
        readout_token_ids: ids whose raw (untempered, unmasked) logits are returned at every scored column.
        want_entropy: also return the per-token entropy of the (masked, tempered) policy.

    Returns:
        ``per_token_logps`` ``(B, T)``; ``entropy`` ``(B, T)`` when asked; ``readout`` ``(B, T+1, K)`` when asked:
        column 0 is the last prompt token (state end), column ``j`` the ``j``-th response token, so the last
        response token of row ``b`` (action end) is column ``completion_mask[b].sum()``.
    """
    B, L = input_ids.shape
    T = int(completion_length)
    if not 0 < T < L:
        raise ValueError(f"completion_length must be in [1, {L - 1}] for rows of length {L}, got {T}")
    backbone, head = _backbone_and_head(model)
    out = backbone(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids_from_mask(attention_mask),
        use_cache=False,
    )
    hidden_all = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    keep = T + 1 if readout_token_ids is not None else T
    start = L - T - 1
    hidden = hidden_all[:, start : start + keep]  # (B, keep, H): columns P-1 .. P+keep-2
    targets = torch.zeros((B, keep), dtype=torch.long, device=input_ids.device)
    targets[:, :T] = input_ids[:, L - T :]
    device = input_ids.device
    exclude = None
    if exclude_token_ids is not None and len(exclude_token_ids) > 0:
        exclude = torch.as_tensor(list(exclude_token_ids), dtype=torch.long, device=device)
    readout = torch.as_tensor(list(readout_token_ids), dtype=torch.long, device=device) if readout_token_ids else None
    flat_h = hidden.reshape(B * keep, -1)
    flat_t = targets.reshape(B * keep)
    weight, bias = head.weight, getattr(head, "bias", None)
    logps, ents, ros = [], [], []
    for s in range(0, flat_h.shape[0], chunk_size):
        args = (flat_h[s : s + chunk_size], weight, bias, flat_t[s : s + chunk_size], temperature, exclude, readout)
        if torch.is_grad_enabled() and flat_h.requires_grad:
            lp, en, ro = checkpoint(_chunk_stats, *args, want_entropy, use_reentrant=False)
        else:
            lp, en, ro = _chunk_stats(*args, want_entropy)
        logps.append(lp)
        ents.append(en)
        ros.append(ro)
    result = {"per_token_logps": torch.cat(logps).view(B, keep)[:, :T]}
    if want_entropy:
        result["entropy"] = torch.cat(ents).view(B, keep)[:, :T]
    if readout is not None:
        result["readout"] = torch.cat(ros).view(B, keep, -1)
    return result


def per_token_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    chunk_size: int = 1024,
    temperature: float = 1.0,
    exclude_token_ids: Sequence[int] | None = None,
) -> torch.Tensor:
    """``(B, T)`` log-probs of the last ``logits_to_keep`` tokens of each row (TRL's name), computed in chunks."""
    return forward_completion(
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        temperature=temperature,
        chunk_size=chunk_size,
        exclude_token_ids=exclude_token_ids,
    )["per_token_logps"]


def entropy_from_logits(
    logits: torch.Tensor, *, chunk_size: int = 1024, exclude_token_ids: Sequence[int] | None = None
) -> torch.Tensor:
    """Entropy over the last dim of ``logits`` (``(..., V)`` -> ``(...)``), chunked over the leading positions."""
    flat = logits.reshape(-1, logits.shape[-1])
    exclude = (
        torch.as_tensor(list(exclude_token_ids), dtype=torch.long, device=logits.device) if exclude_token_ids else None
    )
    parts = []
    for s in range(0, flat.shape[0], chunk_size):
        lg = _masked_logits(flat[s : s + chunk_size], 1.0, exclude)
        parts.append(_entropy(lg, torch.logsumexp(lg, dim=-1)))
    return torch.cat(parts).view(logits.shape[:-1])


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (token-mean aggregation); 0 for an empty mask."""
    mask = mask.to(values.dtype)
    if dim is None:
        return (values * mask).sum() / mask.sum().clamp(min=1.0)
    return (values * mask).sum(dim) / mask.sum(dim).clamp(min=1.0)
