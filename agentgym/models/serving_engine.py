"""The built-in serving engine: a scheduler thread that time-slices batched ``generate`` calls between requests.

Requests that share sampling settings (temperature, top-p, seed) and arrive together are put into one
*group* and decoded as one batch, so the N agents of one turn cost about one generation. Each group keeps its
own KV cache, and the scheduler serves the groups round-robin, one bounded *slice* at a time: a prompt is
prefilled in chunks of ``prefill_chunk`` tokens, and decoding runs ``slice_tokens`` tokens per turn. A client
whose request is huge (a long prompt, a large ``max_tokens``, a large ``n``) therefore only delays the others
by one slice per round, never by its whole generation. Rows that finish (EOS, a stop string, their own
``max_tokens``, a client that went away) leave the batch and their cache rows are dropped.

Tokens are reported as they are sampled (``on_event``, from the scheduler thread): the HTTP layer turns them
into server-sent events or a whole response. Log-probabilities are the sampled token's under the request's
temperature (temperature 0: the raw distribution), over the full vocabulary, before top-p truncation -- the
same quantity :class:`~agentgym.models.generation.HFGenerator` records for training.

A seeded group draws from its own saved torch RNG state, so the other groups interleaved with it do not change
its samples: a seeded request gives the same answer when it is sent again with the same companions (alone,
or as the same turn of the same agents), which is also what one batched in-process ``generate`` gives.
"""

from __future__ import annotations

import collections
import inspect
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.models.generation import _eos_ids, pad_id


@dataclass
class TokenEvent:
    """Choice ``index`` sampled ``token`` (with its logprob and the top alternatives when asked for)."""

    index: int
    token: int
    logprob: float | None = None
    top: list[tuple[int, float]] | None = None


@dataclass
class FinishEvent:
    """Choice ``index`` is finished: ``reason`` is ``"stop"`` or ``"length"``; ``tokens`` counts its ids."""

    index: int
    reason: str
    tokens: int


@dataclass
class DoneEvent:
    """Every choice of the request is finished (the last event of a request)."""


@dataclass
class ErrorEvent:
    """Generation failed; the request is over."""

    message: str


@dataclass
class GenRequest:
    """One chat completion to generate, already validated and tokenized.

    Attributes:
        prompt: prompt token ids (chat template applied).
        n: number of choices; max_tokens: per choice; stop: stop strings (the row ends once its text holds one).
        temperature, top_p, seed: sampling settings (requests batch together only when these are equal).
        logprobs, top_logprobs: report the sampled token's logprob and this many alternatives.
        on_event: called from the scheduler thread with each event; must be quick and thread-safe.
    """

    prompt: list[int]
    n: int = 1
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    on_event: Callable[[Any], None] = lambda event: None
    cancelled: threading.Event = field(default_factory=threading.Event)
    remaining: int = 0  # choices not yet finished (set by the engine)

    @property
    def key(self) -> tuple:
        if self.temperature == 0:
            return (0.0, 1.0, None)  # greedy: top-p and the seed change nothing
        return (self.temperature, self.top_p, self.seed)


@dataclass
class _Row:
    req: GenRequest
    index: int
    ids: list[int] = field(default_factory=list)
    done: bool = False


class _Group:
    """Rows decoded as one batch: their left-padded ids, attention mask, KV cache and RNG state."""

    def __init__(self, rows: list[_Row], ids: Any, mask: Any, cache: Any, rng: Any) -> None:
        self.rows = rows
        self.ids = ids  # (B, L) prompt + generated so far
        self.mask = mask  # (B, L)
        self.cache = cache
        self.prefilled = 0  # prompt positions already in the cache by chunked prefill
        self.rng = rng  # saved RNG state of a seeded group, else None
        self.key = rows[0].req.key


class _Recorder:
    """Logits processor keeping the step's log-softmax at the request temperature (before top-p)."""

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature if temperature > 0 else 1.0
        self.logp = None

    def __call__(self, input_ids, scores):
        import torch

        self.logp = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores


class _RowCriteria:
    """Stopping criterion run once per decoding step: records each row's new token, reports it, and says which
    rows are done (EOS, stop string, own max_tokens, cancelled). Finished rows are padded by ``generate``."""

    def __init__(self, engine: Engine, rows: list[_Row], recorder: _Recorder | None, top_k: int) -> None:
        self.engine = engine
        self.rows = rows
        self.recorder = recorder
        self.top_k = top_k

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        new = input_ids[:, -1].tolist()
        logp = self.recorder.logp if self.recorder is not None else None
        top_vals = top_ids = None
        if logp is not None and self.top_k > 0:
            top_vals, top_ids = torch.topk(logp, self.top_k, dim=-1)
            top_vals, top_ids = top_vals.tolist(), top_ids.tolist()
        done = []
        for i, row in enumerate(self.rows):
            if not row.done:
                self.engine._advance(row, new[i], logp, i, top_vals, top_ids)
            done.append(row.done)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class Engine:
    """Batched, time-sliced generation over a transformers causal LM, run by one scheduler thread.

    Args:
        model, tokenizer: a loaded causal LM and its tokenizer (the tokenizer needs a pad or EOS token).
        max_batch: most rows (choices) decoded in one group.
        slice_tokens: tokens a group decodes before the next group gets its turn.
        prefill_chunk: prompt tokens prefilled per turn (long prompts are prefilled over several turns).
        max_groups: groups decoded concurrently (each holds a KV cache); later requests wait in the queue.
        gather_s: how long the scheduler waits after a request arrives for the rest of its turn.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch: int = 32,
        slice_tokens: int = 16,
        prefill_chunk: int = 512,
        max_groups: int = 8,
        gather_s: float = 0.005,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = pad_id(tokenizer)
        self.eos_ids = _eos_ids(model, tokenizer)
        self.max_batch = max_batch
        self.slice_tokens = slice_tokens
        self.prefill_chunk = prefill_chunk
        self.max_groups = max_groups
        self.gather_s = gather_s
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"  # transformers 5.x renamed it
        self._keep_kw = "logits_to_keep" in params
        self.batches: list[int] = []  # rows of each group formed (tests and logs)
        self.cancelled_rows = 0  # rows dropped unfinished because their client went away
        self.queue: queue.Queue[GenRequest] = queue.Queue()
        self.groups: collections.deque[_Group] = collections.deque()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._loop, daemon=True, name="agentgym-serve-engine")
        self._worker.start()

    @property
    def context_length(self) -> int:
        """Most tokens (prompt + completion) the model's positions cover."""
        cfg = self.model.config
        for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(cfg, name, None)
            if isinstance(value, int) and value > 0:
                return value
        return 2048

    def submit(self, req: GenRequest) -> None:
        """Queue ``req``; its events arrive through ``req.on_event``."""
        if self._stop.is_set():
            raise RuntimeError("the engine is closed")
        req.remaining = req.n
        self.queue.put(req)

    def close(self) -> None:
        self._stop.set()
        self._worker.join(timeout=10)

    # -- scheduler ----------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        pending: list[GenRequest] = []
        while not self._stop.is_set():
            if not self.groups and not pending:
                try:
                    pending.append(self.queue.get(timeout=0.1))
                except queue.Empty:
                    continue
                time.sleep(self.gather_s)  # let the other requests of the same turn arrive
            while True:
                try:
                    pending.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            pending = self._admit(pending)
            if not self.groups:
                continue
            group = self.groups.popleft()
            try:
                self._turn(group)
            except Exception as exc:  # answer every row of the group instead of hanging its clients
                message = f"{type(exc).__name__}: {exc}"
                for req in {id(r.req): r.req for r in group.rows if not r.done}.values():
                    req.remaining = 0
                    req.on_event(ErrorEvent(message))
                continue
            live = [r for r in group.rows if not r.done]
            if live:
                self._drop_finished(group)
                self.groups.append(group)

    def _admit(self, pending: list[GenRequest]) -> list[GenRequest]:
        """Form groups from waiting requests (same key, in arrival order); return those that must wait."""
        gone = [r for r in pending if r.cancelled.is_set()]
        self.cancelled_rows += sum(r.n for r in gone)
        pending = [r for r in pending if not r.cancelled.is_set()]
        while pending and len(self.groups) < self.max_groups:
            key = pending[0].key
            take, rest, rows = [], [], 0
            for r in pending:
                if r.key == key and (rows == 0 or rows + r.n <= self.max_batch):
                    take.append(r)
                    rows += r.n
                else:
                    rest.append(r)
            pending = rest
            self.groups.append(self._new_group(take))
        return pending

    def _new_group(self, reqs: list[GenRequest]):
        import torch

        rows = [_Row(req, i) for req in reqs for i in range(req.n)]
        prompts = [r.req.prompt for r in rows]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        device = next(self.model.parameters()).device
        rng = None
        seed = reqs[0].key[2]
        if seed is not None:
            saved = self._get_rng(device)
            torch.manual_seed(seed)
            rng = self._get_rng(device)
            self._set_rng(device, saved)
        from transformers import DynamicCache

        self.batches.append(len(rows))
        return _Group(rows, ids.to(device), mask.to(device), DynamicCache(), rng)

    @staticmethod
    def _get_rng(device):
        import torch

        if device.type == "cuda":
            return torch.get_rng_state(), torch.cuda.get_rng_state(device)
        return torch.get_rng_state(), None

    @staticmethod
    def _set_rng(device, state) -> None:
        import torch

        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], device)

    def _drop_finished(self, group: _Group) -> None:
        import torch

        keep = [i for i, r in enumerate(group.rows) if not r.done]
        if len(keep) == len(group.rows):
            return
        index = torch.tensor(keep, dtype=torch.long, device=group.ids.device)
        group.rows = [group.rows[i] for i in keep]
        group.ids = group.ids.index_select(0, index)
        group.mask = group.mask.index_select(0, index)
        group.cache.batch_select_indices(index)

    def _turn(self, group: _Group) -> None:
        """One bounded piece of work for ``group``: a prefill chunk, or up to ``slice_tokens`` decoded tokens."""
        import torch

        for r in group.rows:  # a client that went away frees its rows at the next turn
            if not r.done and r.req.cancelled.is_set():
                r.done = True
                self.cancelled_rows += 1
        if all(r.done for r in group.rows):
            return
        length = group.ids.shape[1]
        with torch.no_grad():
            if length - 1 - group.prefilled > self.prefill_chunk:
                a, b = group.prefilled, group.prefilled + self.prefill_chunk
                pos = (group.mask.cumsum(-1) - 1).clamp(min=0)
                kwargs: dict[str, Any] = {self._cache_kw: group.cache, "use_cache": True}
                if self._keep_kw:
                    kwargs["logits_to_keep"] = 1
                self.model(
                    input_ids=group.ids[:, a:b], attention_mask=group.mask[:, :b], position_ids=pos[:, a:b], **kwargs
                )
                group.prefilled = b
                return
            self._decode(group)

    def _decode(self, group: _Group) -> None:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        temperature, top_p, _ = group.key
        want_lp = any(r.req.logprobs for r in group.rows)
        top_k = max(r.req.top_logprobs for r in group.rows)
        recorder = _Recorder(temperature) if want_lp else None
        criteria = _RowCriteria(self, group.rows, recorder, top_k)
        steps = min(self.slice_tokens, max(r.req.max_tokens - len(r.ids) for r in group.rows if not r.done))
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max(steps, 1),
            do_sample=temperature > 0,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids) or None,
            logits_processor=LogitsProcessorList([recorder] if recorder is not None else []),
            stopping_criteria=StoppingCriteriaList([criteria]),
        )
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        kwargs[self._cache_kw] = group.cache
        device = group.ids.device
        saved = None
        if group.rng is not None:
            saved = self._get_rng(device)
            self._set_rng(device, group.rng)
        was_training = self.model.training
        self.model.eval()
        try:
            out = self.model.generate(input_ids=group.ids, attention_mask=group.mask, **kwargs)
        finally:
            if was_training:
                self.model.train()
            if saved is not None:
                group.rng = self._get_rng(device)
                self._set_rng(device, saved)
        new = out.shape[1] - group.ids.shape[1]
        group.ids = out
        group.mask = torch.cat([group.mask, group.mask.new_ones((out.shape[0], new))], dim=1)
        group.prefilled = out.shape[1] - 1  # the cache holds everything but the last token: no more prefill

    # -- per token ------------------------------------------------------------------------------------------
    def _advance(self, row: _Row, token: int, logp, i: int, top_vals, top_ids) -> None:
        """Record ``token`` for ``row`` (batch row ``i``), emit it, and finish the row when it is done."""
        req = row.req
        row.ids.append(token)
        if token in self.eos_ids:
            self._finish(row, "stop")
            return
        event = TokenEvent(row.index, token)
        if req.logprobs and logp is not None:
            event.logprob = float(logp[i, token])
            if req.top_logprobs:
                event.top = list(zip(top_ids[i][: req.top_logprobs], top_vals[i][: req.top_logprobs]))
        req.on_event(event)
        if req.stop and self._hit_stop(row.ids, req.stop):
            self._finish(row, "stop")
        elif len(row.ids) >= req.max_tokens:
            self._finish(row, "length")

    def _hit_stop(self, ids: list[int], stop: tuple[str, ...]) -> bool:
        # A stop string of c characters lies within the last 4c+2 tokens (a character is at most 4 bytes, and every
        # token holds at least one byte), and it was not in the text one token earlier: the tail suffices.
        window = 4 * max(len(s) for s in stop) + 2
        tail = self.tokenizer.decode(ids[-window:], skip_special_tokens=False)
        return any(s in tail for s in stop)

    def _finish(self, row: _Row, reason: str) -> None:
        row.done = True
        req = row.req
        req.on_event(FinishEvent(row.index, reason, len(row.ids)))
        req.remaining -= 1
        if req.remaining == 0:
            req.on_event(DoneEvent())
