"""A randomly initialised Qwen2 causal LM with a byte-level tokenizer, made here with no download.

monte's whole loop (SFT, GRPO, eval) has to run on a laptop CPU with no network, so the model it
starts from is built on the spot: :func:`init_model` writes a folder that
``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained`` load offline.

The tokenizer
    Byte-level BPE with no merges: ids 0-255 are the bytes themselves (id == byte value), then
    ``<|endoftext|>`` 256, ``<|im_start|>`` 257, ``<|im_end|>`` 258, so the vocabulary is 259.
    Any text encodes (one id per UTF-8 byte) and decodes back exactly, NFC-normalised first.
    Left padding (decoder-only batches generate from the right edge), no BOS.

End of text
    ``eos_token`` and ``pad_token`` are both ``<|endoftext|>``: monte's quickstarts train on raw
    prompts (``p 48213 =`` -> ``even``), where TRL appends ``eos_token`` to each completion, so
    the model learns to stop with it. The chat template ends an assistant turn with
    ``<|im_end|>`` instead, so ``generation_config.json`` stops ``generate()`` at either id.

Why the pipeline copies Qwen2's (NFC, then Qwen2's split regex, then byte-level): for
``model_type == "qwen2"`` transformers 5 ignores ``tokenizer_config.json``'s class and loads
``Qwen2Tokenizer``, which rebuilds the normalizer and pre-tokenizer itself, dropping what
``tokenizer.json`` says. Writing the same pipeline keeps the file and the loaded tokenizer one thing.

Determinism: the same ``(size, seed)`` gives byte-identical files (with the same torch and
transformers versions, which ``config.json`` records).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import error
from monte.hashing import sha256_files
from monte.result_type import Result

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
ENDOFTEXT_ID, IM_START_ID, IM_END_ID = 256, 257, 258
VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)
#: Long system prompts overflowed 512 positions; RoPE makes 2048 free in parameters.
MAX_POSITIONS = 2048
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int


#: tiny: 1,018,368 parameters, the model the quickstart measurements used; small: 3,216,384.
SIZES: dict[str, Shape] = {
    "tiny": Shape(hidden=128, intermediate=512, layers=4, heads=4, kv_heads=2),
    "small": Shape(hidden=256, intermediate=768, layers=4, heads=4, kv_heads=2),
}

#: ChatML. ``{% generation %}`` marks what the assistant says (its ``<|im_end|>`` included, so
#: the model learns to stop); TRL's assistant-only loss and ``return_assistant_tokens_mask`` read it.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

#: Qwen2's pre-tokenizer split (transformers' ``tokenization_qwen2.PRETOKENIZE_REGEX``).
QWEN2_SPLIT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for each byte, as the ByteLevel pre-tokenizer writes them."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def shape_of(size: str) -> Shape:
    try:
        return SIZES[size]
    except KeyError:
        raise error("E_USAGE", f"unknown model size {size!r}",
                    f"choose one of: {', '.join(SIZES)}") from None


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """The 259-token byte-level tokenizer (no merges), with the ChatML template."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    symbols = _bytes_to_unicode()
    vocab = {symbols[b]: b for b in range(256)}
    tok = Tokenizer(BPE(vocab=vocab, merges=[], continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    assert tok.token_to_id(ENDOFTEXT) == ENDOFTEXT_ID and tok.token_to_id(IM_END) == IM_END_ID
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=ENDOFTEXT,
        pad_token=ENDOFTEXT,
        padding_side="left",
        # The default clean-up rewrites " ." to "." on decode: that would break the round trip.
        clean_up_tokenization_spaces=False,
        model_max_length=MAX_POSITIONS,
        chat_template=CHAT_TEMPLATE,
    )


def random_model(shape: Shape, seed: int) -> PreTrainedModel:
    """A float32 Qwen2ForCausalLM with tied embeddings, initialised from ``seed`` alone."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=VOCAB_SIZE,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_window_layers=shape.layers,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=ENDOFTEXT_ID,
        pad_token_id=ENDOFTEXT_ID,
        dtype="float32",
    )
    # A private RNG stream, and float32 while the weights are drawn (the bytes depend on it);
    # the caller's RNG and default dtype are left as they were.
    default_dtype = torch.get_default_dtype()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        torch.set_default_dtype(torch.float32)
        try:
            model = Qwen2ForCausalLM(config)
        finally:
            torch.set_default_dtype(default_dtype)
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=[ENDOFTEXT_ID, IM_END_ID], pad_token_id=ENDOFTEXT_ID,
    )
    return model


def _refuse_occupied(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise error("E_REFUSED", f"{out_dir} exists and is not a folder",
                    "choose a new folder for the model")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise error("E_REFUSED", f"{out_dir} exists and is not empty; monte writes a new model "
                    "only into a new or empty folder",
                    f"choose a new folder, or empty or remove {out_dir} first")


def _umask_modes(folder: Path) -> None:
    # safetensors writes its file 0600 (and mkdtemp makes 0700); give them the usual umask modes.
    mask = os.umask(0)
    os.umask(mask)
    folder.chmod(0o777 & ~mask)
    for p in folder.iterdir():
        p.chmod(0o666 & ~mask)


@dataclass(frozen=True)
class ModelMade(Result):
    """``monte model init``: the folder written, its size and shape (``hidden``, ``layers``,
    ``heads``, ``kv_heads``, ...), its tokens, each file's sha256, and its bytes."""

    path: str
    size: str
    seed: int
    parameters: int
    architecture: str
    shape: dict[str, Any]
    vocab_size: int
    eos_token: str
    pad_token: str
    files: dict[str, str]
    bytes: int


def init_model(out_dir: Path, size: str = "tiny", seed: int = 0) -> ModelMade:
    """Write a randomly initialised causal LM and its tokenizer into ``out_dir``.

    ``out_dir`` must be new or empty. The folder appears whole or not at all: it is written
    beside ``out_dir`` and renamed into place. Returns ``path``, ``size``, ``seed``,
    ``parameters`` (tied embeddings counted once), the shape, and ``files`` (name -> sha256).
    """
    shape = shape_of(size)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise error("E_USAGE", f"seed must be an integer from 0 to 2**63 - 1, not {seed!r}",
                    "pass a non-negative integer seed")
    out_dir = Path(out_dir).absolute()
    _refuse_occupied(out_dir)

    from transformers.utils import logging as hf_logging

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
    try:
        byte_tokenizer().save_pretrained(tmp)
        model = random_model(shape, seed)
        parameters = sum(p.numel() for p in model.parameters())  # a tied tensor is listed once
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # "Writing model shards" on stderr is noise here
        try:
            model.save_pretrained(tmp)  # transformers 5 writes safetensors only
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        _umask_modes(tmp)
        _refuse_occupied(out_dir)  # again: something may have landed there meanwhile
        if out_dir.exists():
            out_dir.rmdir()
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    names = sorted(p.name for p in out_dir.iterdir())
    hashes = sha256_files([out_dir / n for n in names])
    return ModelMade(
        path=str(out_dir),
        size=size,
        seed=seed,
        parameters=parameters,
        architecture="Qwen2ForCausalLM",
        shape=asdict(shape),
        vocab_size=VOCAB_SIZE,
        eos_token=ENDOFTEXT,
        pad_token=ENDOFTEXT,
        files={n: hashes[str(out_dir / n)] for n in names},
        bytes=sum((out_dir / n).stat().st_size for n in names),
    )
