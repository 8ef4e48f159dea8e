"""The near-copy sketch, measured: how far each perturbation of a model and each honest pair of
different models lie from the nearest known model (``monte.models.identity.distance``), against
the threshold ``identity.NEAR``.

Perturbations (of the tiny base, seed 0, and of a checkpoint fine-tuned from it): a flipped bit
(a mantissa bit, and the top exponent bit), junk files, an extra safetensors file, an unused
tensor, a duplicated tied ``lm_head``, a ``pytorch_model.bin`` beside or instead of the
safetensors, bf16 and fp16 round trips, a bit-identical copy. Honest different models: other
seeds, the other size, and real fine-tuning steps from the base (AdamW at the learning rates of
``sft-tiny``, 3e-3, and ``grpo-tiny``, 1e-4, on the parity prompts' language-model loss).

    python bench/sketch_distances.py [--quick] [--json-out FILE]

Every perturbation must be within the threshold of the model it copies (caught: that model's
cohort, or refused as a checkpoint) and every honest pair beyond it (never confused); the script
exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _tensors(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return dict(load_file(str(folder / "model.safetensors")))


def _save(folder: Path, tensors: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})


def _flip(bit: int) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "model.safetensors"
        raw = bytearray(path.read_bytes())
        (n,) = struct.unpack("<Q", raw[:8])
        element = (len(raw) - 8 - n) // 8  # an f32 element in the data's middle
        raw[8 + n + element * 4 + bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(raw))
    return edit


def _state_dict(folder: Path) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    return dict(AutoModelForCausalLM.from_pretrained(str(folder)).state_dict())


def _bin(instead: bool) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        import torch

        torch.save(_state_dict(folder), folder / "pytorch_model.bin")
        if instead:
            (folder / "model.safetensors").unlink()
    return edit


def _cast(dtype: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        import torch

        to = getattr(torch, dtype)
        _save(folder, {k: v.to(to).to(torch.float32) for k, v in _tensors(folder).items()})
    return edit


def _extra(folder: Path) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({"x": torch.randn(16, 16)}, str(folder / "extra.safetensors"))


def _unused(folder: Path) -> None:
    import torch

    t = _tensors(folder)
    t["model.unused.weight"] = torch.randn(256, 256)
    _save(folder, t)


def _tied(folder: Path) -> None:
    t = _tensors(folder)
    t["lm_head.weight"] = t["model.embed_tokens.weight"].clone()
    _save(folder, t)


PERTURBATIONS: dict[str, Callable[[Path], object]] = {
    "bit flip (mantissa)": _flip(0),
    "bit flip (top exponent bit)": _flip(30),
    "junk notes.bin": lambda f: (f / "notes.bin").write_bytes(b"notes\n" * 100),
    "extra.safetensors": _extra,
    "unused tensor": _unused,
    "duplicated tied lm_head": _tied,
    "pytorch_model.bin beside": _bin(False),
    "pytorch_model.bin instead": _bin(True),
    "bf16 round trip": _cast("bfloat16"),
    "fp16 round trip": _cast("float16"),
    "bit-identical copy + junk file": lambda f: (f / "scratch.pt").write_bytes(bytes(range(256))),
}


def fine_tune(base: Path, out: Path, lr: float, steps: int) -> None:
    """Real optimizer steps: AdamW on the causal LM loss of parity prompts and answers."""
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(0)
    for _ in range(steps):
        texts = []
        for _ in range(8):
            n = rng.randrange(10_000, 99_999)
            texts.append(f"p {n} = {'even' if n % 2 == 0 else 'odd'}<|endoftext|>")
        batch = tok(texts, return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two seeds, one fine-tuning step, fewer perturbations")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)

    import torch

    from monte.models import identity
    from monte.models.tiny import init_model

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="sketch-"))
    try:
        known: dict[str, Path] = {}
        seeds = (0, 1) if args.quick else (0, 1, 2, 3)
        for s in seeds:
            known[f"tiny seed {s}"] = tmp / f"tiny{s}"
            init_model(known[f"tiny seed {s}"], seed=s)
        if not args.quick:
            known["small seed 0"] = tmp / "small0"
            init_model(known["small seed 0"], size="small", seed=0)
        tunes = [(3e-3, 1)] if args.quick else [(3e-3, 1), (3e-3, 5), (1e-4, 1), (1e-4, 5), (1e-4, 20)]
        for lr, steps in tunes:
            name = f"tiny seed 0 + {steps} AdamW step(s) at lr {lr:g}"
            known[name] = tmp / f"ft-{lr:g}-{steps}"
            fine_tune(known["tiny seed 0"], known[name], lr, steps)
        sketches = {n: identity.sketch(p) for n, p in known.items()}
        ids = {n: identity.weights_identity(p) for n, p in known.items()}

        def nearest(name: str, sk: dict[str, Any]) -> tuple[str, float]:
            return min(((k, identity.distance(v, sk)) for k, v in sketches.items() if k != name),
                       key=lambda kv: kv[1])

        honest: list[dict[str, Any]] = []
        for name in known:
            other, d = nearest(name, sketches[name])
            honest.append({"model": name, "nearest": other, "distance": round(d, 6)})
        perturbed: list[dict[str, Any]] = []
        origins = ["tiny seed 0"] + ([] if args.quick else [f"tiny seed 0 + 5 AdamW step(s) at lr {3e-3:g}"])
        moves = list(PERTURBATIONS.items())[: 4 if args.quick else None]
        for origin in origins:
            for move, edit in moves:
                folder = tmp / f"p-{len(perturbed)}"
                shutil.copytree(known[origin], folder)
                edit(folder)
                sk = identity.sketch(folder)
                other, d = min(((k, identity.distance(v, sk)) for k, v in sketches.items()), key=lambda kv: kv[1])
                perturbed.append({"move": move, "of": origin, "nearest": other, "distance": round(d, 6),
                                  "same_identity": identity.weights_identity(folder) == ids[origin]})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    worst = max(p["distance"] for p in perturbed)
    best = min(h["distance"] for h in honest)
    caught = all(p["distance"] <= identity.NEAR and p["nearest"] == p["of"] for p in perturbed)
    apart = all(h["distance"] > identity.NEAR for h in honest)
    out = {"threshold": identity.NEAR, "rtol": identity.RTOL, "k": identity.K, "perturbations": perturbed,
           "honest": honest, "max_perturbation_distance": worst, "min_honest_distance": best,
           "all_perturbations_caught": caught, "false_confusions": sum(h["distance"] <= identity.NEAR for h in honest),
           "quick": args.quick, "seconds": round(time.perf_counter() - t0, 1)}
    for p in perturbed:
        print(f"  {p['move']:<32} of {p['of']:<40} {p['distance']:.6f} (nearest: {p['nearest']}"
              + (", same identity" if p["same_identity"] else "") + ")")
    for h in honest:
        print(f"  {h['model']:<52} {h['distance']:.6f} from {h['nearest']}")
    print(f"threshold {identity.NEAR}: perturbations at most {worst:.6f}, honest pairs at least {best:.6f}; "
          f"{'all caught' if caught else 'NOT ALL CAUGHT'}, {out['false_confusions']} false confusion(s)")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if caught and apart else 1


if __name__ == "__main__":
    raise SystemExit(main())
