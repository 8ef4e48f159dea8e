"""The weights identity is what the loader reads; near-copies are not new bases (issue 25, cases
1 and 2; issue 29, case 6's safetensors headers). Each move was reproduced on the code before
this file existed: there the variant was a fresh cohort (a fresh seal), the decoy loaded a
checkpoint under the base's cohort, and a hostile header was E_INTERNAL.

Everything here is real: tiny models made on the spot, their files edited the way a person
would (safetensors and torch write them), and the CLI in-process on a real repository."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import checkpoint, snapshot_state


def _eval(monte, *args: str):
    return monte("eval", "--yes", "--json", *args)


def _plan(monte, *args: str) -> dict[str, Any]:
    r = monte("eval", "--dry-run", "--json", *args)
    assert r.code == 0, r.out + r.err
    plan: dict[str, Any] = r.json()["plan"]
    return plan


def _record_base(repo: Path, experiment: str = "exp") -> str:
    """The experiment's base commit, as a first eval or chunk writes it (its setup and sketch)."""
    from monte.ledger.experiment import Ledger
    from monte.ledger.lineage import ensure_base, identify_base
    from monte.models.locate import locate
    from monte.workspace import open_workspace

    ws = open_workspace(repo)
    where = locate(ws, Ledger(ws.store, experiment).measurement().model or "")
    assert where.folder is not None
    ident = identify_base(ws.store, experiment, where.folder)
    cohort, _ = ensure_base(ws.store, experiment, where.ref, ident.files, cohort=ident.cohort,
                            weights=ident.weights, folder=where.folder)
    return cohort


def _error(r: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(r.out)["error"]
    return doc


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _tensors(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return dict(load_file(str(folder / "model.safetensors")))


def _save(folder: Path, tensors: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def flip_a_bit(folder: Path) -> None:
    """One bit of one weight, in the middle of model.safetensors' data."""
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", raw[:8])
    at = 8 + n + (len(raw) - 8 - n) // 2
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def junk_bin(folder: Path) -> None:
    (folder / "notes.bin").write_bytes(b"my notes, not weights\n" * 10)


def junk_pt(folder: Path) -> None:
    (folder / "scratch.pt").write_bytes(bytes(range(256)))


def extra_safetensors(folder: Path) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"x": torch.randn(16, 16)}, str(folder / "extra.safetensors"))


def unused_tensor(folder: Path) -> None:
    import torch

    t = _tensors(folder)
    t["model.unused.weight"] = torch.randn(64, 64)
    _save(folder, t)


def tied_lm_head(folder: Path) -> None:
    t = _tensors(folder)
    assert "lm_head.weight" not in t  # tied: save_pretrained writes the embedding once
    t["lm_head.weight"] = t["model.embed_tokens.weight"].clone()
    _save(folder, t)


def _state_dict(folder: Path) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    return dict(AutoModelForCausalLM.from_pretrained(str(folder)).state_dict())  # lm_head tied: one storage


def bin_beside(folder: Path) -> None:
    import torch

    torch.save(_state_dict(folder), folder / "pytorch_model.bin")


def bin_instead(folder: Path) -> None:
    import torch

    torch.save(_state_dict(folder), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


def bf16_round_trip(folder: Path) -> None:
    import torch

    _save(folder, {k: v.to(torch.bfloat16).to(torch.float32) for k, v in _tensors(folder).items()})


def renamed(folder: Path) -> None:
    """Issue 42, case 1: the ``model.`` prefix stripped from every tensor name (the loader adds it)."""
    _save(folder, {k.removeprefix("model."): v for k, v in _tensors(folder).items()})


def nested(folder: Path) -> None:
    """... or doubled (the loader drops one level)."""
    _save(folder, {f"model.{k}" if k.startswith("model.") else k: v for k, v in _tensors(folder).items()})


BASE_VARIANTS: dict[str, Callable[[Path], None]] = {
    "bit-flip": flip_a_bit, "junk-bin": junk_bin, "extra-safetensors": extra_safetensors,
    "unused-tensor": unused_tensor, "tied-lm-head": tied_lm_head, "bin-beside": bin_beside,
    "bin-instead": bin_instead, "bf16-round-trip": bf16_round_trip, "copy-and-junk": junk_pt,
    "renamed": renamed, "nested": nested,
}


@pytest.mark.parametrize("variant", sorted(BASE_VARIANTS))
def test_a_near_copy_of_the_base_is_its_cohort(repo: Path, monte, exp: str, base_model: Path,
                                               variant: str) -> None:
    _record_base(repo)  # a base is known once recorded: an eval or a chunk of it
    base = _plan(monte)
    copy = _copy(base_model, repo.parent / f"base-{variant}")
    BASE_VARIANTS[variant](copy)
    plan = _plan(monte, "--model", str(copy))
    assert plan["cohort"] == base["cohort"] and plan["weights"] == base["weights"], variant


def test_no_near_copy_of_the_base_gets_a_fresh_seal(repo: Path, monte, exp: str, base_model: Path) -> None:
    assert _eval(monte, "--split", "test").code == 0  # test@0 of the base: its one baseline read
    for variant, make in sorted(BASE_VARIANTS.items()):
        copy = _copy(base_model, repo.parent / f"sealed-{variant}")
        make(copy)
        before = snapshot_state(repo)
        r = _eval(monte, "--split", "test", "--model", str(copy), "--dry-run")
        assert r.code == 3 and _error(r)["code"] == "E_SEALED", (variant, r.out)
        assert snapshot_state(repo) == before
    # the record says what the identity is: ledger verify still passes
    assert monte("ledger", "verify", "--json").code == 0


@pytest.mark.parametrize("variant", ["bit-flip", "junk-bin", "renamed", "nested"])
def test_a_near_copy_of_a_checkpoint_is_refused_naming_it(repo: Path, monte, exp: str, tiny_models,
                                                          variant: str) -> None:
    run = checkpoint(repo, tiny_models[1])
    folder = repo / ".monte" / "runs" / "exp" / run / "checkpoints" / "step-50"
    copy = _copy(folder, repo.parent / f"ck-{variant}")
    BASE_VARIANTS[variant](copy)
    before = snapshot_state(repo)
    for args in (("--split", "test"), ("--split", "dev")):
        r = _eval(monte, *args, "--model", str(copy), "--dry-run")
        assert r.code == 3, r.out
        err = _error(r)
        assert err["code"] == "E_REFUSED" and f"exp/{run}@50" in err["message"], err
        assert "monte eval --checkpoint" in err["fix"]
    r = monte("train", "--recipe", "sft-tiny", "--source", "parity-sft", "--from-base", "--model", str(copy),
              "--dry-run", "--json")
    assert r.code == 3 and _error(r)["code"] == "E_REFUSED", r.out
    assert snapshot_state(repo) == before


def _decoy(repo: Path, base: Path, weights: Path, shard: str) -> Path:
    """The base's config and tokenizer, its weights as decoy.safetensors, and an index that
    sends the loader to ``shard``: a copy of another model's weights."""
    out = repo.parent / f"decoy-{shard.replace('/', '_')}"
    out.mkdir()
    for f in base.iterdir():
        if f.name != "model.safetensors":
            shutil.copy2(f, out / f.name)
    shutil.copy2(base / "model.safetensors", out / "decoy.safetensors")
    target = out / shard
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(weights / "model.safetensors", target)
    names = list(_tensors(weights))
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 0}, "weight_map": {n: shard for n in names}}))
    return out


def test_a_decoy_folder_that_loads_a_checkpoint_is_refused(repo: Path, monte, exp: str, base_model: Path,
                                                           tiny_models) -> None:
    from transformers import AutoModelForCausalLM

    run = checkpoint(repo, tiny_models[1])
    trained = repo / ".monte" / "runs" / "exp" / run / "checkpoints" / "step-50"
    decoy = _decoy(repo, base_model, trained, "rng_state.safetensors")
    # what transformers loads from it is the checkpoint, not the base
    loaded = AutoModelForCausalLM.from_pretrained(str(decoy)).state_dict()["model.embed_tokens.weight"]
    assert loaded.equal(_tensors(trained)["model.embed_tokens.weight"])
    before = snapshot_state(repo)
    for split in ("dev", "test"):
        r = _eval(monte, "--split", split, "--model", str(decoy), "--dry-run")
        assert r.code == 3, r.out
        err = _error(r)
        assert err["code"] == "E_REFUSED" and "rng_state.safetensors" in err["message"], err
    # an index naming a shard outside the folder: refused before anything is read from there
    outside = _decoy(repo, base_model, trained, "sub/model-00001.safetensors")
    (outside / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "../ck/model.safetensors"}}))
    r = _eval(monte, "--model", str(outside), "--dry-run")
    assert r.code == 6 and _error(r)["code"] == "E_UNSAFE_PATH", r.out
    assert snapshot_state(repo) == before


def test_an_index_the_identity_follows_is_the_model_it_loads(repo: Path, monte, exp: str, base_model: Path,
                                                            tiny_models) -> None:
    """Resharding holds, and a decoy whose index names a shard with an ordinary name is the
    model the shard holds (here: another base), not the base whose file sits beside it."""
    decoy = _decoy(repo, base_model, tiny_models[2], "model-00001-of-00001.safetensors")
    assert _plan(monte, "--model", str(decoy))["cohort"] == _plan(monte, "--model", str(tiny_models[2]))["cohort"]
    assert _plan(monte, "--model", str(decoy))["cohort"] != _plan(monte)["cohort"]


def test_the_setup_of_a_cohorts_base_is_part_of_it(repo: Path, monte, exp: str, base_model: Path,
                                                  tiny_models) -> None:
    """A copy of the recorded base with another config, generation config or tokenizer is not
    that cohort's base (a sabotaged base would anchor a low baseline), nor a fresh cohort."""
    checkpoint(repo, tiny_models[1])  # records the cohort's base commit, setup and sketch included
    edits: dict[str, Callable[[Path], object]] = {
        "config": lambda f: (f / "config.json").write_text(
            (f / "config.json").read_text().replace('"rope_theta": 10000.0', '"rope_theta": 10.0')),
        "generation": lambda f: (f / "generation_config.json").write_text('{"do_sample": false}\n'),
        "tokenizer": lambda f: (f / "chat_template.jinja").write_text("{{ messages[0]['content'] }}"),
    }
    before = snapshot_state(repo)
    for part, edit in edits.items():
        copy = _copy(base_model, repo.parent / f"setup-{part}")
        edit(copy)
        r = _eval(monte, "--model", str(copy), "--dry-run")
        assert r.code == 3, (part, r.out)
        err = _error(r)
        assert err["code"] == "E_REFUSED" and f"another {part}" in err["message"], (part, err)
    assert snapshot_state(repo) == before
    # metadata does not count: transformers_version, a re-saved tokenizer_config's class name
    copy = _copy(base_model, repo.parent / "setup-metadata")
    cfg = json.loads((copy / "config.json").read_text())
    cfg["transformers_version"] = "0.0.1"
    (copy / "config.json").write_text(json.dumps(cfg, indent=4))
    tok = json.loads((copy / "tokenizer_config.json").read_text())
    tok["tokenizer_class"], tok["is_local"] = "Qwen2Tokenizer", True
    (copy / "tokenizer_config.json").write_text(json.dumps(tok))
    assert _plan(monte, "--model", str(copy))["cohort"] == _plan(monte)["cohort"]


def _header_file(folder: Path, header: bytes) -> None:
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)


@pytest.mark.parametrize("header", [
    b'{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1e999]}}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}',
    b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 8]}}',
], ids=["offsets-1e999", "nested-100000", "short-data", "huge-int"])
def test_a_hostile_safetensors_header_is_bad_input(repo: Path, monte, exp: str, base_model: Path,
                                                   header: bytes) -> None:
    bad = _copy(base_model, repo.parent / "hostile")
    _header_file(bad, header)
    before = snapshot_state(repo)
    for args in (("eval", "--dry-run", "--json"), ("train", "--recipe", "sft-tiny", "--source", "parity-sft",
                                                   "--from-base", "--dry-run", "--json")):
        r = monte(*args, "--model", str(bad))
        assert r.code == 6, r.out + r.err
        err = _error(r)
        assert err["code"] == "E_BAD_INPUT" and "model.safetensors" in err["message"], err
    assert snapshot_state(repo) == before


def test_a_torch_file_is_read_without_running_its_pickle(tmp_path: Path, base_model: Path) -> None:
    """A pytorch_model.bin is read by a restricted unpickler: a global other than a tensor's is
    refused, never called (torch.load without weights_only would run it)."""
    import pickle
    import zipfile

    from monte.errors import MonteError
    from monte.models import identity

    folder = _copy(base_model, tmp_path / "evil")
    (folder / "model.safetensors").unlink()
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    with zipfile.ZipFile(folder / "pytorch_model.bin", "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": Evil()}, protocol=2))
    with pytest.raises(MonteError) as e:
        identity.weights_identity(folder)
    assert e.value.code == "E_BAD_INPUT" and not marker.exists()


def test_an_older_ledgers_cohort_is_kept(repo: Path, monte, exp: str, base_model: Path) -> None:
    """A base commit as the previous monte wrote it (no sketch, no setup; its weights identity
    counted every weight-suffixed file, a junk one included) keeps its cohort and its seal."""
    from monte.ledger.lineage import ensure_base, previous_weights_identity, servable_files
    from monte.models import identity
    from monte.workspace import open_workspace

    folder = _copy(base_model, repo.parent / "old-base")
    junk_bin(folder)
    files = servable_files(folder)
    then = previous_weights_identity(folder, files)
    assert then != identity.weights_identity(folder)  # the junk counted then, not now
    ws = open_workspace(repo)
    cohort, _ = ensure_base(ws.store, "exp", str(folder), files, cohort=then[:12], weights=then)
    plan = _plan(monte, "--model", str(folder))
    assert plan["cohort"] == cohort and plan["weights"] == then
    assert monte("ledger", "verify", "--json").code == 0


def test_a_renamed_checkpoint_loads_as_the_checkpoint_and_is_its_weights(tmp_path: Path, tiny_models) -> None:
    """Issue 42, case 1: the copy is no near miss. transformers loads the renamed folder into the
    very model (every logit equal), so the identity is the checkpoint's, not a sketch at distance 1."""
    import torch
    from transformers import AutoModelForCausalLM

    from monte.models.identity import distance, identify

    src = tiny_models[1]
    copy = _copy(src, tmp_path / "renamed")
    renamed(copy)
    assert not any(k.startswith("model.") for k in _tensors(copy))
    ids = torch.tensor([[1, 5, 9, 2, 7, 3]])
    with torch.no_grad():
        a = AutoModelForCausalLM.from_pretrained(str(src)).eval()(ids).logits
        b = AutoModelForCausalLM.from_pretrained(str(copy)).eval()(ids).logits
    assert torch.equal(a, b)
    x, y = identify(src), identify(copy)
    assert x.weights == y.weights and distance(x.sketch, y.sketch) == 0.0
