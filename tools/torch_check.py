"""Is this environment's torch the CPU build? ``make setup`` runs this after installing, on a machine without a GPU.

A bare ``torch`` from the default package index is the CUDA build on Linux: it pulls ``nvidia-*`` and
``cuda-*`` wheels (several GB) that a CPU machine never uses. This check fails, with the command that fixes
it, when the venv holds a CUDA torch (``torch.version.cuda`` set) or any such CUDA library package.

Run: ``python tools/torch_check.py`` (exit 1 and the fix on stderr when CUDA libraries are present);
``python tools/torch_check.py --reachable URL`` exits 0 when the index at URL answers within a few seconds
(setup.sh asks before it tries PyTorch's CPU wheel index).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable

#: PyTorch's CPU wheel index (``torch==X`` there is ``X+cpu``, without CUDA libraries).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

#: Name prefixes of the CUDA runtime wheels a CUDA torch pulls (nvidia-cublas-cu12, cuda-toolkit, ...).
CUDA_PREFIXES = ("nvidia-", "nvidia_", "cuda-", "cuda_")


def cuda_packages(names: Iterable[str]) -> list[str]:
    """The CUDA library packages among distribution ``names`` (sorted, normalised to lower case with dashes)."""
    norm = {n.lower().replace("_", "-") for n in names}
    return sorted(n for n in norm if n.startswith(CUDA_PREFIXES))


def installed_names() -> list[str]:
    """Names of the distributions installed in this interpreter's environment."""
    return [d.metadata["Name"] for d in md.distributions() if d.metadata["Name"]]


def problems(torch_cuda: str | None, names: Iterable[str]) -> list[str]:
    """Why this environment is not a CPU-only torch install (empty when it is)."""
    out = []
    if torch_cuda is not None:
        out.append(f"torch is the CUDA {torch_cuda} build (torch.version.cuda = {torch_cuda!r})")
    libs = cuda_packages(names)
    if libs:
        out.append(f"{len(libs)} CUDA library package(s) installed: {', '.join(libs)}")
    return out


def fix_command(python: str, torch_version: str, libs: list[str]) -> str:
    """The shell command that replaces a CUDA torch by the CPU build of the same version."""
    base = torch_version.split("+")[0]
    remove = " ".join(["torch", *libs])
    return (
        f"{python} -m pip uninstall -y {remove} && "
        f"{python} -m pip install -c constraints.txt --no-deps --index-url {CPU_INDEX} torch=={base}"
    )


def reachable(url: str, timeout: float = 5.0) -> bool:
    """True when ``url`` answers (any HTTP status) within ``timeout`` seconds, name lookup included."""
    result: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(url, timeout=timeout).close()
            result.append(True)
        except urllib.error.HTTPError:
            result.append(True)  # the host answered
        except Exception:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)  # a hung name lookup ignores urlopen's timeout
    t.start()
    t.join(timeout)
    return bool(result and result[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reachable", metavar="URL", help="only probe whether the index at URL answers (exit 0/1)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for --reachable (default 5)")
    opts = p.parse_args(argv)
    if opts.reachable:
        return 0 if reachable(opts.reachable.rstrip("/") + "/torch/", opts.timeout) else 1
    try:
        import torch
    except ImportError:
        print("torch_check: torch is not installed in this environment", file=sys.stderr)
        return 1
    names = installed_names()
    found = problems(torch.version.cuda, names)
    if torch.cuda.is_available() or not found:
        if not found:
            print(f"torch_check: torch {torch.__version__}, CPU build, no CUDA libraries installed")
        return 0
    print(f"torch_check: a CUDA torch on a machine without a GPU: {'; '.join(found)}", file=sys.stderr)
    print(f"fix: {fix_command(sys.executable, torch.__version__, cuda_packages(names))}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
