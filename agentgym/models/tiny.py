"""Tiny random causal LMs with a locally trained byte-level BPE tokenizer, for tests and CPU smoke runs.

No network: the tokenizer is trained in well under a second on a built-in corpus of the words our
envs and prompts use, with ChatML special tokens and a chat template, and the model is a few hundred
thousand parameters built from a config. The folder written by :func:`make_tiny_model` loads with
``AutoTokenizer`` / ``AutoModelForCausalLM`` like any checkpoint.
"""

from __future__ import annotations

from pathlib import Path

#: ChatML template (the Qwen2.5/SmolLM2 format) so prompts built for real models work unchanged.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]

_CORPUS = """
You are an agent. Your task is to: put a clean mug in the coffeemachine. Prior to this step, you have already
taken 3 step(s). Below are the most recent observations and the corresponding actions you took.
Your admissible actions of the current situation are: go to countertop 1, take mug 1 from countertop 1,
move mug 1 to coffeemachine 1, open fridge 1, close fridge 1, heat egg 1 with microwave 1, cool apple 1 with
fridge 1, clean knife 1 with sinkbasin 1, use desklamp 1, examine, look, inventory. Nothing happens.
<think>I should move up to push the box onto the target.</think><action>up</action>
<action>left</action> <action>right</action> <action>down</action> Up Down Left Right
search[wireless headphones under 50 dollars] click[Buy Now] click[Back to Search] click[Next >] click[< Prev]
click[Description] click[Features] click[Reviews] click[Attributes] [SEP] Instruction: i need a large red shirt
price lower than 30.00 dollars. search[entity] lookup[keyword] finish[answer] Thought Action Observation
Question: Which magazine was started first, Arthur's Magazine or First for Women? The answer is yes no.
# _ O X P S √ G . W A B C @ the a of and to in is was for on with as by at from it that this be are
0 1 2 3 4 5 6 7 8 9 10 100 { } [ ] ( ) : ; , . ! ? " ' - + = * / < > | \\ $ % & @ ^ ~ `
"""


def train_tokenizer(vocab_size: int = 1024):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ChatML specials and the ChatML chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|pad|>",
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<|endoftext|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_tiny_model(
    path: str | Path | None = None,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    vocab_size: int = 1024,
    arch: str = "llama",
    seed: int = 0,
):
    """Build (and, with ``path``, save) a tiny random causal LM and its tokenizer.

    Args:
        path: folder to save both into (loadable with ``from_pretrained``); None keeps them in memory.
        hidden_size, num_layers, num_heads: model size (defaults give ~140k parameters).
        vocab_size: BPE vocabulary size (the model's embedding matches the tokenizer's length).
        arch: ``"llama"`` or ``"qwen2"``. (A qwen2 folder makes ``AutoTokenizer`` pick ``Qwen2Tokenizer``;
            we save ``tokenizer_class`` as ``PreTrainedTokenizerFast`` so the trained ids are kept.)
        seed: torch seed for the random weights.

    Returns:
        ``(model, tokenizer)``.
    """
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    tokenizer = train_tokenizer(vocab_size)
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    config = LlamaConfig(**common) if arch == "llama" else Qwen2Config(**common)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if path is not None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return model, tokenizer


def teach(model, tokenizer, pairs: list[tuple[str, str]], *, epochs: int = 40, lr: float = 3e-3, seed: int = 0):
    """Teacher-force ``model`` to answer each prompt text with its completion text (tests of tool calling).

    A few dozen passes make a tiny random model write, say, a tool call in a chat format after prompts like
    these, so tests can drive real loops with it. Only the completion tokens are trained; updates one pair at
    a time with Adam. Returns ``model`` (trained in place).

    Args:
        pairs: ``(prompt, completion)`` texts; the prompt is what the chat template renders, completion what
            the model must write (end it with the template's end-of-turn token).
        epochs: passes over ``pairs``; lr: Adam learning rate; seed: torch seed.
    """
    import torch

    batch = []
    for prompt, completion in pairs:
        n_prompt = len(tokenizer(prompt, add_special_tokens=False).input_ids)
        ids = torch.tensor(tokenizer(prompt + completion, add_special_tokens=False).input_ids)
        labels = ids.clone()
        labels[:n_prompt] = -100
        batch.append((ids, labels))
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        for ids, labels in batch:
            model(ids[None], labels=labels[None]).loss.backward()
            opt.step()
            opt.zero_grad()
    model.eval()
    return model
