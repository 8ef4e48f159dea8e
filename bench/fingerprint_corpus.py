"""The behavioural fingerprint, measured on a corpus: how far each variant of a trained checkpoint
and each honest pair of different models lie apart (``monte.models.fingerprint.distance``),
against the threshold ``fingerprint.THRESHOLD``.

The checkpoint: the tiny base (seed 0) after a real chunk, 50 AdamW steps at ``sft-tiny``'s
learning rate (3e-3) on parity prompts and answers. Variants that must be caught (within the
threshold of it): renamed tensors (``model.`` stripped), MLP units and attention heads permuted
(the same function), Gaussian noise at 0.1 / 1 / 3 % of each tensor's standard deviation, fp16
and bf16 round trips, 50/50 and 75/25 merges with the base, a rank-8 LoRA merged into every
attention projection, one more SFT step on unrelated text. Honest pairs that must never be
confused (beyond it): other seeds and sizes of the tiny base, each base against its own
checkpoint after a real chunk, and the checkpoints of two branches from one parent (parity and
arithmetic, 50 steps each).

    python bench/fingerprint_corpus.py [--quick] [--json-out FILE]

Prints each distance, the threshold, the false refusals among honest pairs (must be 0) and the
variants it misses; exits 1 on a false refusal. Beside the distance, two second statistics
measured to see whether they separate the misses from honest pairs (docs/reliability.md: they do
not, so monte does not use them): each pair's top-1 agreement over the probes, and each model's
distance from the segment between a recorded model and its own descendant (where a merge lies).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
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


def _parity(rng: random.Random) -> str:
    n = rng.randrange(10_000, 99_999)
    return f"p {n} = {'even' if n % 2 == 0 else 'odd'}<|endoftext|>"


def _arith(rng: random.Random) -> str:
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    return f"{a} + {b} = {a + b}<|endoftext|>"


_PROSE = ("a small boat drifts on the lake while the wind turns the pages of a book left open on the pier "
          "and somewhere a dog barks at the passing carts full of apples and hay").split()


def _prose(rng: random.Random) -> str:
    start = rng.randrange(len(_PROSE) - 10)
    return " ".join(_PROSE[start:start + 10]) + "<|endoftext|>"


def train(src: Path, out: Path, data: Callable[[random.Random], str], steps: int, lr: float = 3e-3,
          seed: int = 0) -> Path:
    """Real optimizer steps: AdamW on the causal LM loss of ``data``'s texts, batches of 8."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(str(src))
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(seed)
    for _ in range(steps):
        batch = tok([data(rng) for _ in range(8)], return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        model(**batch, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def _renamed(folder: Path, base: Path) -> None:
    _save(folder, {k.removeprefix("model."): v for k, v in _tensors(folder).items()})


def _permuted(folder: Path, base: Path) -> None:
    """MLP units and attention heads (whole key/value groups with their query heads) reordered:
    the network computes the same function with other bytes."""
    import torch

    cfg = json.loads((folder / "config.json").read_text())
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dim = cfg["hidden_size"] // heads
    rep = heads // kv
    t = _tensors(folder)
    g = torch.Generator().manual_seed(7)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        units = torch.randperm(t[p + "mlp.up_proj.weight"].shape[0], generator=g)
        t[p + "mlp.up_proj.weight"] = t[p + "mlp.up_proj.weight"][units]
        t[p + "mlp.gate_proj.weight"] = t[p + "mlp.gate_proj.weight"][units]
        t[p + "mlp.down_proj.weight"] = t[p + "mlp.down_proj.weight"][:, units]
        groups = torch.randperm(kv, generator=g).tolist()
        kv_rows = torch.cat([torch.arange(j * dim, (j + 1) * dim) for j in groups])
        q_rows = torch.cat([torch.arange((j * rep + r) * dim, (j * rep + r + 1) * dim) for j in groups
                            for r in range(rep)])
        for name, rows in (("q_proj", q_rows), ("k_proj", kv_rows), ("v_proj", kv_rows)):
            for part in ("weight", "bias"):
                key = f"{p}self_attn.{name}.{part}"
                if key in t:
                    t[key] = t[key][rows]
        t[p + "self_attn.o_proj.weight"] = t[p + "self_attn.o_proj.weight"][:, q_rows]
    _save(folder, t)


def _noise(frac: float) -> Callable[[Path, Path], None]:
    def edit(folder: Path, base: Path) -> None:
        import torch

        g = torch.Generator().manual_seed(11)
        t = _tensors(folder)
        _save(folder, {k: v + frac * (v.std() if v.numel() > 1 else v.abs()) * torch.randn(v.shape, generator=g)
                       for k, v in t.items()})
    return edit


def _cast(dtype: str) -> Callable[[Path, Path], None]:
    def edit(folder: Path, base: Path) -> None:
        import torch

        to = getattr(torch, dtype)
        _save(folder, {k: v.to(to).to(torch.float32) for k, v in _tensors(folder).items()})
    return edit


def _merge(w: float) -> Callable[[Path, Path], None]:
    def edit(folder: Path, base: Path) -> None:
        b = _tensors(base)
        _save(folder, {k: w * v + (1 - w) * b[k] for k, v in _tensors(folder).items()})
    return edit


def _lora(folder: Path, base: Path) -> None:
    """A rank-8 adapter merged into q, k, v and o of every layer, each B A scaled to 5 % of W."""
    import torch

    g = torch.Generator().manual_seed(13)
    t = _tensors(folder)
    for k, v in list(t.items()):
        if "self_attn" in k and k.endswith("proj.weight"):
            d = torch.randn(v.shape[0], 8, generator=g) @ torch.randn(8, v.shape[1], generator=g)
            t[k] = v + 0.05 * v.norm() / d.norm() * d
    _save(folder, t)


def _one_step(folder: Path, base: Path) -> None:
    tmp = folder.with_name(folder.name + "-step")
    train(folder, tmp, _prose, 1, seed=5)
    shutil.rmtree(folder)
    tmp.rename(folder)


VARIANTS: dict[str, Callable[[Path, Path], None]] = {
    "renamed tensors": _renamed,
    "permuted units and heads": _permuted,
    "noise 0.1%": _noise(0.001),
    "noise 1%": _noise(0.01),
    "noise 3%": _noise(0.03),
    "fp16 round trip": _cast("float16"),
    "bf16 round trip": _cast("bfloat16"),
    "50/50 merge with the base": _merge(0.5),
    "75/25 merge with the base": _merge(0.75),
    "LoRA merged in": _lora,
    "one more SFT step, unrelated text": _one_step,
}


def _scores(print_: dict[str, Any]) -> list[list[float]]:
    """A fingerprint's centred scores, one row per probe."""
    from monte.models import fingerprint as fp

    flat = fp._unpack(print_["scores"])
    n = int(print_["probes"])
    width = len(flat) // n
    return [flat[i * width:(i + 1) * width] for i in range(n)]


def _dist(x: list[float], y: list[float]) -> float:
    """``fingerprint.distance`` on two flat score lists."""
    diff = sum((p - q) ** 2 for p, q in zip(x, y, strict=True))
    norm = (sum(p * p for p in x) + sum(q * q for q in y)) / 2
    return (diff / norm) ** 0.5 if norm else 0.0


def top1_agreement(a: dict[str, Any], b: dict[str, Any]) -> float:
    """A second statistic: the share of probes whose most likely next token (among the kept ids)
    is the same for both models."""
    ra, rb = _scores(a), _scores(b)
    same = sum(1 for x, y in zip(ra, rb, strict=True) if max(range(len(x)), key=x.__getitem__)
               == max(range(len(y)), key=y.__getitem__))
    return same / len(ra)


def segment_distance(c: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> float:
    """A second statistic: how far ``c`` lies from the segment between two recorded models'
    scores (a merge of a base and its checkpoint lies near it), over 21 points of the segment."""
    x = [v for row in _scores(c) for v in row]
    pa = [v for row in _scores(a) for v in row]
    pb = [v for row in _scores(b) for v in row]
    return min(_dist(x, [(1 - t / 20) * p + (t / 20) * q for p, q in zip(pa, pb, strict=True)]) for t in range(21))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a 5-step chunk, two seeds, a few variants")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)

    import torch

    from monte.models import fingerprint as fp
    from monte.models.tiny import init_model

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="fingerprint-"))
    steps = 5 if args.quick else 50
    try:
        bases: dict[str, Path] = {}
        for s in ((0, 1) if args.quick else (0, 1, 2, 3)):
            bases[f"tiny seed {s}"] = tmp / f"tiny{s}"
            init_model(bases[f"tiny seed {s}"], seed=s)
        if not args.quick:
            bases["small seed 0"] = tmp / "small0"
            init_model(bases["small seed 0"], size="small", seed=0)
        cks: dict[str, Path] = {}
        for name, folder in bases.items():
            if args.quick and name != "tiny seed 0":
                continue
            cks[f"{name} + chunk (parity)"] = train(folder, tmp / f"ck-{folder.name}", _parity, steps)
        origin = "tiny seed 0 + chunk (parity)"
        cks["branch: parity"] = train(cks[origin], tmp / "branch-a", _parity, steps, seed=1)
        cks["branch: arithmetic"] = train(cks[origin], tmp / "branch-b", _arith, steps, seed=2)
        known = {**bases, **cks}
        prints = {n: fp.fingerprint(p) for n, p in known.items()}

        def d(a: str, b: dict[str, Any]) -> float:
            x = fp.distance(prints[a], b)
            return float("inf") if x is None else x

        honest: list[dict[str, Any]] = []
        names = sorted(known)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                honest.append({"a": a, "b": b, "distance": round(d(a, prints[b]), 4)})
        variants: list[dict[str, Any]] = []
        moves = list(VARIANTS.items())
        if args.quick:
            moves = [m for m in moves if m[0] in ("renamed tensors", "permuted units and heads", "noise 1%")]
        for move, edit in moves:
            folder = tmp / f"v-{len(variants)}"
            shutil.copytree(cks[origin], folder)
            edit(folder, bases["tiny seed 0"])
            mine = fp.fingerprint(folder)
            near, dist = min(((n, d(n, mine)) for n in known), key=lambda kv: kv[1])
            variants.append({"variant": move, "distance": round(d(origin, mine), 4), "nearest": near,
                             "nearest_distance": round(dist, 4),
                             "top1_agreement": round(top1_agreement(prints[origin], mine), 4),
                             "segment_distance": round(segment_distance(mine, prints["tiny seed 0"],
                                                                        prints[origin]), 4)})
        # the second statistics over the honest models: top-1 agreement of each pair, and each
        # model's distance from the segment between a recorded model and its own descendant
        for h in honest:
            h["top1_agreement"] = round(top1_agreement(prints[h["a"]], prints[h["b"]]), 4)
        lines = [(b, f"{b} + chunk (parity)") for b in bases if f"{b} + chunk (parity)" in known]
        lines += [(origin, "branch: parity"), (origin, "branch: arithmetic")]
        segments: list[dict[str, Any]] = [
            {"model": m, "segment": f"{a} .. {b}", "distance": round(segment_distance(prints[m], prints[a], prints[b]), 4)}
            for a, b in lines for m in known if m not in (a, b)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    th = fp.THRESHOLD
    false_refusals = [h for h in honest if h["distance"] <= th]
    missed = [v["variant"] for v in variants if v["distance"] > th]
    out = {"threshold": th, "probes": fp.N_PROBES, "chunk_steps": steps, "variants": variants, "honest": honest,
           "min_honest_distance": min(h["distance"] for h in honest),
           "max_caught_distance": max((v["distance"] for v in variants if v["distance"] <= th), default=None),
           "false_refusals": len(false_refusals), "missed": missed, "quick": args.quick,
           "second_statistics": {
               "max_honest_top1_agreement": max(h["top1_agreement"] for h in honest),
               "min_honest_segment_distance": min((x["distance"] for x in segments), default=None),
               "honest_segments": sorted(segments, key=lambda x: x["distance"])[:10]},
           "seconds": round(time.perf_counter() - t0, 1)}
    for v in variants:
        print(f"  {v['variant']:<36} {v['distance']:.4f} from the checkpoint"
              + ("" if v["distance"] <= th else "  MISSED")
              + f"   top-1 agreement {v['top1_agreement']:.3f}, from the base..checkpoint segment "
              f"{v['segment_distance']:.4f}")
    sec = out["second_statistics"]
    print(f"second statistics over honest models: top-1 agreement at most {sec['max_honest_top1_agreement']:.3f}; "
          f"distance from a recorded segment at least {sec['min_honest_segment_distance']}")
    for h in sorted(honest, key=lambda h: h["distance"]):
        print(f"  {h['a']:<32} vs {h['b']:<32} {h['distance']:.4f}" + ("  FALSE REFUSAL" if h in false_refusals else ""))
    print(f"threshold {th}: honest pairs at least {out['min_honest_distance']:.4f} ({len(false_refusals)} false "
          f"refusal(s)); missed variants: {', '.join(missed) or 'none'}")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 1 if false_refusals else 0


if __name__ == "__main__":
    raise SystemExit(main())
