"""Model pins: a checkpoint folder's sha256, hub revisions (against a local HF cache), and refusals."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from agentgym.agents import from_spec, model_target
from agentgym.models import loading
from agentgym.models.loading import ModelPinError, check_pin, checkpoint_files, checkpoint_sha256, load_model
from agentgym.models.tiny import make_tiny_model

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "tiny"
    make_tiny_model(path, seed=0)
    return path


@pytest.fixture
def hub(tmp_path, ckpt, monkeypatch):
    """An offline HF cache holding ``agentgym/tiny`` at COMMIT_A, which ``main`` points to."""
    import huggingface_hub.constants as constants

    repo = tmp_path / "hub" / "models--agentgym--tiny"
    shutil.copytree(ckpt, repo / "snapshots" / COMMIT_A)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT_A)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return repo


def test_checkpoint_sha256_is_the_documented_shell_command(ckpt, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(ckpt, copy)
    (copy / "README.md").write_text("notes do not change the weights")
    (copy / ".cache").mkdir()
    (copy / ".cache" / "lock").write_text("x")
    assert checkpoint_files(copy) == checkpoint_files(ckpt) and "model.safetensors" in checkpoint_files(ckpt)
    shell = subprocess.run(
        "find -L . -type f ! -path '*/.*' ! -name '*.md' -printf '%P\\n' | LC_ALL=C sort "
        "| xargs -d '\\n' sha256sum | sha256sum",
        shell=True,
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    assert checkpoint_sha256(copy) == checkpoint_sha256(ckpt) == shell


def test_changed_weights_or_config_change_the_hash_and_are_refused_before_loading(ckpt, tmp_path):
    pinned = checkpoint_sha256(ckpt)
    for name in ("model.safetensors", "config.json", "tokenizer_config.json"):
        copy = tmp_path / name
        shutil.copytree(ckpt, copy)
        raw = bytearray((copy / name).read_bytes())
        raw[-2] ^= 1  # one bit
        (copy / name).write_bytes(bytes(raw))
        assert checkpoint_sha256(copy) != pinned, name
        with pytest.raises(ModelPinError, match=f"has sha256 {checkpoint_sha256(copy)}, not the pinned {pinned}"):
            load_model(copy, device="cpu", checkpoint_sha256=pinned)
    model, _ = load_model(ckpt, device="cpu", checkpoint_sha256=pinned)
    assert model.num_parameters() > 0


def test_a_revision_of_a_plain_folder_is_an_error(ckpt):
    with pytest.raises(ModelPinError, match="records no hub revision: pin it with checkpoint_sha256"):
        load_model(ckpt, device="cpu", revision=COMMIT_A)
    with pytest.raises(ModelPinError, match="is not a local folder"):
        check_pin("agentgym/not-here", checkpoint_sha256="0" * 64)


def test_hub_revision_is_passed_to_from_pretrained(hub):
    snapshot = hub / "snapshots" / COMMIT_A
    assert loading.hub_commit("agentgym/tiny") == COMMIT_A  # what main points to
    assert loading.hub_commit("agentgym/tiny", COMMIT_B) is None
    model, _ = load_model("agentgym/tiny", device="cpu", revision=COMMIT_A)
    assert model.num_parameters() > 0
    with pytest.raises(OSError, match="cannot load model"):  # a commit the cache lacks is never replaced by main
        load_model("agentgym/tiny", device="cpu", revision=COMMIT_B)
    # a snapshot folder records its commit: the right one loads, another is refused
    load_model(snapshot, device="cpu", revision=COMMIT_A)
    with pytest.raises(ModelPinError, match=f"snapshot of commit {COMMIT_A}, not the pinned revision {COMMIT_B}"):
        load_model(snapshot, device="cpu", revision=COMMIT_B)


def test_hf_spec_with_revision(hub):
    assert model_target(f"hf:agentgym/tiny@{COMMIT_A}") == ("hf", "agentgym/tiny", COMMIT_A)
    assert model_target(f"react:hf:agentgym/tiny@{COMMIT_A}") == ("hf", "agentgym/tiny", COMMIT_A)
    assert model_target("reflexion:openai:gpt-x") == ("openai", "gpt-x", None)
    assert model_target("hf:/a/b") == ("hf", "/a/b", None) and model_target("random") is None
    agent = from_spec(f"hf:agentgym/tiny@{COMMIT_A}", device="cpu")
    assert agent.name == f"hf:agentgym/tiny@{COMMIT_A}"
    with pytest.raises(OSError):
        from_spec(f"hf:agentgym/tiny@{COMMIT_B}", device="cpu")
    with pytest.raises(ValueError, match="the spec pins revision"):
        from_spec(f"hf:agentgym/tiny@{COMMIT_A}", device="cpu", revision=COMMIT_B)


def test_cpu_has_native_bf16_reads_the_cpu_flags(monkeypatch, tmp_path):
    """Autocast to bf16 on CPU only pays on CPUs with native bf16 (x86 avx512_bf16/amx_bf16, Arm bf16)."""
    from agentgym.models import loading

    real = loading.Path

    def fake(flags: str):
        info = tmp_path / "cpuinfo"
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        monkeypatch.setattr(loading, "Path", lambda p: info if p == "/proc/cpuinfo" else real(p))
        loading.cpu_has_native_bf16.cache_clear()
        return loading.cpu_has_native_bf16()

    try:
        assert fake("fpu sse2 avx2 avx512f avx512bw") is False
        assert fake("fpu sse2 avx512f avx512_bf16") is True
        assert fake("fpu amx_tile amx_bf16") is True
    finally:
        loading.cpu_has_native_bf16.cache_clear()


def test_loading_a_model_prints_no_per_tensor_progress_bars(ckpt, capfd):
    """Model loading is one line per stage in our logs: transformers' "Loading weights" bar stays off."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    load_model(str(ckpt), device="cpu")
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()  # restored for code outside our loader


def test_quiet_loading_silences_the_gguf_dequantizing_bar_and_restores_it(capfd):
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    original = gguf_utils.tqdm
    with loading.quiet_loading():
        list(gguf_utils.tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."))
    assert "de-quantizing" not in capfd.readouterr().err
    assert gguf_utils.tqdm is original
