"""monte/models/tiny.py and `monte model init`: a random Qwen2 + byte tokenizer, made offline."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from monte.cli.model import model as model_group
from monte.errors import MonteError
from monte.models.tiny import ENDOFTEXT_ID, IM_END_ID, IM_START_ID, ModelMade, init_model

torch.set_num_threads(1)


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def no_network() -> Iterator[None]:
    """Any attempt to open a connection fails: loading must need nothing but the folder."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(socket, "create_connection", refuse)
        yield


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, no_network: None) -> ModelMade:
    return init_model(tmp_path_factory.mktemp("m") / "tiny", size="tiny", seed=0)


@pytest.fixture(scope="module")
def loaded(tiny: ModelMade, no_network: None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.path)
    lm = AutoModelForCausalLM.from_pretrained(tiny.path)
    lm.eval()
    return lm, tok


def test_same_size_and_seed_give_identical_files(tiny: ModelMade, tmp_path: Path) -> None:
    again = init_model(tmp_path / "again", size="tiny", seed=0)
    first = _hashes(Path(tiny.path))
    assert first == _hashes(Path(again.path)) == tiny.files == again.files
    assert set(first) >= {"config.json", "generation_config.json", "model.safetensors",
                          "tokenizer.json", "tokenizer_config.json"}

    other = init_model(tmp_path / "seed1", size="tiny", seed=1)
    assert other.files["model.safetensors"] != first["model.safetensors"]
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"):
        assert other.files[name] == first[name], name


def test_init_leaves_the_callers_rng_alone(tmp_path: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    init_model(tmp_path / "m", seed=7)
    assert torch.equal(torch.rand(3), expected)


def test_loads_offline_with_the_auto_classes(tiny: ModelMade, loaded: tuple[Any, Any]) -> None:
    lm, tok = loaded
    assert lm.dtype == torch.float32
    assert lm.config.model_type == "qwen2" and lm.config.vocab_size == 259 == len(tok)
    assert lm.config.max_position_embeddings == 2048
    assert lm.lm_head.weight.data_ptr() == lm.model.embed_tokens.weight.data_ptr()  # tied
    assert tok.padding_side == "left" and tok.bos_token is None
    assert tok.eos_token_id == tok.pad_token_id == ENDOFTEXT_ID
    assert list(lm.generation_config.eos_token_id) == [ENDOFTEXT_ID, IM_END_ID]
    assert lm.generation_config.pad_token_id == ENDOFTEXT_ID
    # AutoTokenizer (Qwen2Tokenizer in transformers 5) rebuilds its own pipeline: it must be the
    # one written to tokenizer.json, or the file would not describe the tokenizer in use.
    on_disk = json.loads((Path(tiny.path) / "tokenizer.json").read_text())
    in_use = json.loads(tok.backend_tokenizer.to_str())
    for part in ("normalizer", "pre_tokenizer", "decoder", "model", "added_tokens"):
        assert in_use[part] == on_disk[part], part


def test_parameter_counts(tiny: ModelMade, loaded: tuple[Any, Any], tmp_path: Path) -> None:
    lm, _ = loaded
    assert tiny.parameters == sum(p.numel() for p in lm.parameters())
    assert 0.9e6 <= tiny.parameters <= 1.1e6
    small = init_model(tmp_path / "small", size="small", seed=0)
    assert 3.0e6 <= small.parameters <= 3.4e6
    assert small.shape["hidden"] == 256


def test_generate_on_a_left_padded_batch(loaded: tuple[Any, Any]) -> None:
    lm, tok = loaded
    prompts = ["p 48213 =", "p 7 = odd\np 48213 ="]
    batch = tok(prompts, return_tensors="pt", padding=True)
    width = batch["input_ids"].shape[1]
    assert batch["attention_mask"][0, 0] == 0 and batch["input_ids"][0, 0] == ENDOFTEXT_ID
    with torch.no_grad():
        out = lm.generate(**batch, max_new_tokens=6, do_sample=False)
        assert 1 <= out.shape[1] - width <= 6
        fixed = lm.generate(**batch, max_new_tokens=6, min_new_tokens=6, do_sample=False)
        alone = tok(prompts[:1], return_tensors="pt")
        single = lm.generate(**alone, max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert fixed.shape == (2, width + 6)
    # Left padding and the mask are honoured: the padded prompt continues as it does alone.
    assert fixed[0, width:].tolist() == single[0, alone["input_ids"].shape[1]:].tolist()


def test_an_untrained_model_is_near_uniform_and_trainable(loaded: tuple[Any, Any]) -> None:
    lm, tok = loaded
    batch = tok(["p 48213 = odd", "p 2 = even"], return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    loss = lm(**batch, labels=labels).loss
    assert abs(loss.item() - torch.log(torch.tensor(259.0)).item()) < 0.5  # ln 259 = 5.56
    loss.backward()
    assert lm.model.embed_tokens.weight.grad is not None
    lm.zero_grad(set_to_none=True)


@pytest.mark.parametrize("text", ["p 48213 =", "héllo wörld — 日本語 🙂 ½\n\ttabs  and  spaces ."])
def test_tokenizer_round_trip(loaded: tuple[Any, Any], text: str) -> None:
    _, tok = loaded
    ids = tok(text)["input_ids"]
    assert ids == list(text.encode("utf-8"))  # one id per byte, id == byte value
    assert tok.decode(ids) == text


def test_special_tokens_are_single_ids_and_text_is_nfc(loaded: tuple[Any, Any]) -> None:
    _, tok = loaded
    assert tok("<|im_start|>hi<|im_end|><|endoftext|>")["input_ids"] == [
        IM_START_ID, ord("h"), ord("i"), IM_END_ID, ENDOFTEXT_ID]
    decomposed = "cafe\u0301"
    assert tok.decode(tok(decomposed)["input_ids"]) == unicodedata.normalize("NFC", decomposed)


def test_chat_template_is_chatml_with_generation_marks(loaded: tuple[Any, Any]) -> None:
    _, tok = loaded
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "p 4 ="},
            {"role": "assistant", "content": "even"}]
    text = tok.apply_chat_template(chat, tokenize=False)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\np 4 =<|im_end|>\n"
                    "<|im_start|>assistant\neven<|im_end|>\n")
    prompt = tok.apply_chat_template(chat[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")
    enc = tok.apply_chat_template(chat, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
    assert tok.decode(marked) == "even<|im_end|>"


def test_bad_size_and_seed_are_usage_errors(tmp_path: Path) -> None:
    for kwargs in ({"size": "huge"}, {"seed": -1}, {"seed": 2**63}):
        with pytest.raises(MonteError) as e:
            init_model(tmp_path / "m", **kwargs)
        assert e.value.code == "E_USAGE"
    assert not (tmp_path / "m").exists()


def test_cli_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    r = CliRunner().invoke(model_group, ["init", str(target), "--json"])
    assert r.exit_code == 3
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "E_REFUSED" and err["exit_code"] == 3
    assert str(target) in err["message"] and "new folder" in err["fix"]
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]  # no half-written leftovers

    (tmp_path / "a-file").write_text("x")
    r = CliRunner().invoke(model_group, ["init", str(tmp_path / "a-file")])
    assert r.exit_code == 3 and "E_REFUSED" in r.stderr


def test_cli_writes_into_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    r = CliRunner().invoke(model_group, ["init", str(tmp_path / "m"), "--seed", "3", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["parameters"] == 1_018_368 and doc["seed"] == 3 and doc["size"] == "tiny"
    assert doc["files"] == _hashes(tmp_path / "m")
    human = CliRunner().invoke(model_group, ["init", str(tmp_path / "n"), "--size", "small"])
    assert human.exit_code == 0, human.output
    assert "3,216,384 parameters" in human.stdout and str(tmp_path / "n") in human.stdout


def test_cli_rejects_an_unknown_size(tmp_path: Path) -> None:
    r = CliRunner().invoke(model_group, ["init", str(tmp_path / "m"), "--size", "huge"])
    assert r.exit_code == 2
    assert not (tmp_path / "m").exists()


def test_importing_the_model_modules_imports_nothing_heavy() -> None:
    code = ("import sys, monte.models.tiny, monte.cli.model\n"
            "print(','.join(m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
