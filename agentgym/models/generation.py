"""Generation back-ends behind one interface: batched token-in/token-out completion with logprobs.

:class:`HFGenerator` wraps a transformers causal LM (CPU or GPU); :class:`VLLMGenerator` wraps vLLM
(GPU only, imported lazily). Both take prompts as token ids and return one :class:`Completion` per
prompt: the response ids (ending with the EOS token when the model stopped by itself), its text, the
sampling finish reason and, on request, the per-token log-probabilities under the sampling temperature
(the ``old_per_token_logps`` of PPO/GRPO).

Log-probabilities are taken over the full vocabulary after temperature scaling and *before* top-p
truncation, with suppressed ids removed from the softmax -- the same quantity the trainer recomputes
with ``per_token_logps`` (so the importance ratio starts at exactly 1 up to numerics).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Completion:
    """One sampled response.

    Attributes:
        ids: response token ids (EOS included when the model emitted it; cut right after a stop string).
        text: the decoded response (special tokens skipped).
        logprobs: per-token log-probabilities of ``ids`` (None unless asked for).
        finish_reason: ``"stop"`` (EOS or stop string) or ``"length"`` (``max_new_tokens`` reached).
    """

    ids: list[int]
    text: str
    logprobs: list[float] | None
    finish_reason: str


def pad_id(tokenizer: Any) -> int:
    """The id batches are padded with: the pad token, else EOS."""
    pid = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pid is None:
        raise ValueError("the tokenizer has neither a pad nor an EOS token; set tokenizer.pad_token first")
    return pid


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for src in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        eos = getattr(src, "eos_token_id", None) if src is not None else None
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, (list, tuple)):
            ids.update(int(e) for e in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` rendered with the tokenizer's chat template and the generation prompt.

    Rendering to text first and encoding without extra special tokens gives the same ids on every
    transformers version (5.x returns a ``BatchEncoding`` from ``apply_chat_template(tokenize=True)``).
    """
    if not getattr(tokenizer, "chat_template", None):
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
    else:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class _SuppressIds:
    """Logits processor: suppressed ids get -inf (never sampled, excluded from the logprob softmax)."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = list(ids)

    def __call__(self, input_ids, scores):
        scores[:, self.ids] = float("-inf")
        return scores


class _LogprobRecorder:
    """Logits processor that keeps log p(token) of each sampled token, without storing (B, T, V) logits.

    It runs after suppression and before the temperature/top-p warpers (transformers appends custom
    processors after its own non-warper ones), sees step t's logits and, at step t+1, the token sampled
    at t. Only one (B, V) log-softmax is held at a time; the last step is gathered after ``generate``.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature if temperature > 0 else 1.0
        self.prev = None
        self.steps: list[Any] = []

    def __call__(self, input_ids, scores):
        import torch

        if self.prev is not None:
            self.steps.append(self.prev.gather(1, input_ids[:, -1:]).squeeze(1))
        self.prev = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, last_tokens):
        if self.prev is not None:
            self.steps.append(self.prev.gather(1, last_tokens[:, None]).squeeze(1))
            self.prev = None
        import torch

        return torch.stack(self.steps, dim=1) if self.steps else None  # (B, T)


class HFGenerator:
    """Batched generation with a transformers causal LM (left padding, stop strings, logprobs).

    Args:
        model: a ``PreTrainedModel`` with ``generate`` (any device; inputs are moved to its device).
        tokenizer: its tokenizer (needs a pad token; EOS is used when there is none).
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = pad_id(tokenizer)
        self.eos_ids = _eos_ids(model, tokenizer)
        self._stop_cache: dict[tuple[str, ...], Any] = {}

    def _stop_criteria(self, stop_strings: Sequence[str]):
        """A cached ``StopStringCriteria``: building one scans the whole vocabulary (~1 s for 49k tokens),
        which ``generate(stop_strings=...)`` would redo on every call, i.e. every turn."""
        from transformers.generation.stopping_criteria import StopStringCriteria

        key = tuple(stop_strings)
        crit = self._stop_cache.get(key)
        if crit is None:
            crit = self._stop_cache[key] = StopStringCriteria(self.tokenizer, list(key))
        return crit

    @property
    def device(self):
        return next(self.model.parameters()).device

    def pad_left(self, prompts: Sequence[Sequence[int]]):
        """``(input_ids, attention_mask)`` tensors of ``prompts`` padded on the left."""
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            if p:
                ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
                mask[i, width - len(p) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _cut(self, toks: list[int], stop_strings: Sequence[str] | None) -> tuple[int, str]:
        """Length of the real response inside a row of ``generate`` output, and the finish reason.

        A finished row is filled with the pad id afterwards, so the row ends at the first EOS or at the
        end of the first stop string, whichever comes first (checking the stop string first matters when
        pad == EOS: the filler must not count as a sampled EOS).
        """
        end = len(toks)
        reason = "length"
        for k, t in enumerate(toks):
            if t in self.eos_ids:
                end, reason = k + 1, "stop"
                break
        if stop_strings:
            head = toks[: end - 1] if reason == "stop" else toks
            full = self.tokenizer.decode(head, skip_special_tokens=False)
            if any(s in full for s in stop_strings):
                # Smallest prefix whose text contains a stop string (monotone in k: binary search).
                lo, hi = 1, len(head)
                while lo < hi:
                    mid = (lo + hi) // 2
                    text = self.tokenizer.decode(head[:mid], skip_special_tokens=False)
                    if any(s in text for s in stop_strings):
                        hi = mid
                    else:
                        lo = mid + 1
                return lo, "stop"
        return end, reason

    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop_strings: list[str] | None = None,
        return_logprobs: bool = False,
        suppress_token_ids: list[int] | None = None,
        seed: int | None = None,
        top_k: int = 0,
    ) -> list[Completion]:
        """Sample one completion per prompt, all prompts in one batched ``generate`` call.

        Args:
            prompts: token ids of each prompt (already chat-templated).
            max_new_tokens: response length cap.
            temperature: 0 means greedy decoding (logprobs are then at temperature 1).
            top_p: nucleus sampling mass.
            stop_strings: stop a row once its text contains one of these (kept in the response).
            return_logprobs: also return per-token log-probabilities of the sampled ids.
            suppress_token_ids: ids that are never sampled and are excluded from the logprob softmax.
            seed: seeds torch's generator before sampling (reproducible samples on one device).
            top_k: sample among the k most likely tokens only; 0: no top-k cut.
        """
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("empty prompt: every prompt needs at least one token")
        input_ids, attention_mask = self.pad_left(prompts)
        processors = []
        if suppress_token_ids:
            processors.append(_SuppressIds(suppress_token_ids))
        recorder = _LogprobRecorder(temperature) if return_logprobs else None
        if recorder is not None:
            processors.append(recorder)
        do_sample = temperature > 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            do_sample=do_sample,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids) or None,
            logits_processor=LogitsProcessorList(processors),
        )
        if do_sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=int(top_k))
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if stop_strings:
            kwargs["stopping_criteria"] = StoppingCriteriaList([self._stop_criteria(stop_strings)])
        if seed is not None:
            torch.manual_seed(seed)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                out = self.model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        finally:
            if was_training:
                self.model.train()
        gen = out[:, input_ids.shape[1] :]
        lps = recorder.finish(gen[:, -1]) if recorder is not None and gen.shape[1] > 0 else None
        rows = gen.tolist()
        results = []
        for i, toks in enumerate(rows):
            n, reason = self._cut(toks, stop_strings) if toks else (0, "length")
            ids = toks[:n]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            logprobs = lps[i, :n].tolist() if lps is not None else ([] if return_logprobs else None)
            results.append(Completion(ids=ids, text=text, logprobs=logprobs, finish_reason=reason))
        return results


class VLLMGenerator:
    """The same interface over a vLLM engine (GPU). ``vllm`` is imported when this class is built.

    Args:
        model: HF id or local checkpoint folder.
        tokenizer: its tokenizer (used for stop handling and EOS).
        **engine_kwargs: passed to ``vllm.LLM`` (``gpu_memory_utilization``, ``dtype``, ``tensor_parallel_size``...).
    """

    def __init__(self, model: str, tokenizer: Any, **engine_kwargs: Any) -> None:
        try:
            import vllm
        except ImportError as exc:
            from gymnasium.error import DependencyNotInstalled

            raise DependencyNotInstalled(
                "vLLM is not installed: pip install vllm (needs a CUDA GPU); use HFGenerator on CPU"
            ) from exc
        self.vllm = vllm
        self.tokenizer = tokenizer
        self.llm = vllm.LLM(model=str(model), **engine_kwargs)

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Replace the engine's weights in place (HF names, whole tensors) and drop its prefix cache.

        Goes through vLLM's ``Worker.reload_weights``, which maps HF checkpoint names onto vLLM's fused
        layers (qkv, gate/up) exactly as loading a checkpoint does.
        """
        weights = [(name, tensor.detach().contiguous()) for name, tensor in state_dict.items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Shut the engine down and free its weights and KV cache (a second engine in the process needs them)."""
        import gc

        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()

    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop_strings: list[str] | None = None,
        return_logprobs: bool = False,
        suppress_token_ids: list[int] | None = None,
        seed: int | None = None,
        top_k: int = 0,
    ) -> list[Completion]:
        """See :meth:`HFGenerator.generate`. vLLM logprobs are taken after its own sampling processors."""
        params = self.vllm.SamplingParams(
            max_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=int(top_k) if top_k > 0 else -1,
            stop=list(stop_strings or []) or None,
            include_stop_str_in_output=True,
            logprobs=0 if return_logprobs else None,
            seed=seed,
            logit_bias={int(t): -100.0 for t in suppress_token_ids} if suppress_token_ids else None,
        )
        inputs = [{"prompt_token_ids": list(p)} for p in prompts]
        outs = self.llm.generate(inputs, params, use_tqdm=False)
        results = []
        for o in outs:
            c = o.outputs[0]
            ids = list(c.token_ids)
            logprobs = None
            if return_logprobs and c.logprobs is not None:
                logprobs = [float(d[t].logprob) for d, t in zip(c.logprobs, ids)]
            reason = "length" if c.finish_reason == "length" else "stop"
            results.append(Completion(ids=ids, text=c.text, logprobs=logprobs, finish_reason=reason))
        return results
