"""What ``monte plot`` draws: the dev delta of each lineage path against absolute step.

The figure is the picture of ``monte status``'s ``lineage:`` and ``cycles:`` lines, computed
from the same rows with the same functions (:mod:`monte.status`):

- one line per descent path (:func:`monte.status.descent_paths`) and dev exam, through the
  checkpoints the path passes through that carry an admissible dev eval (the first such eval of
  each checkpoint, as a Cycle takes it), at ``(absolute step, stored delta)``, with the stored
  95% interval as an error bar. A path that trained from the base model starts at ``(0, 0)``,
  the baseline itself;
- the Cycles of ``monte status``: ``ok`` as a green dot, ``STRIKE`` as a red x, an unpaired
  (unjudged) one as a hollow grey dot;
- the test reads: a vertical line at step 0 for ``test@0`` and one at the claim's step, annotated
  with the claim's paired test delta (also drawn as a star with its interval) when it has one.

With no checkpoint dev eval yet the plot is still written (baseline, test reads, and the note
"no checkpoint has a dev eval yet" on the axes); the result says so in ``note``. An empty
picture is an honest answer to "how is this experiment going", so it is not refused.

The ledger reading and the rules are pure and light; matplotlib is imported only inside
:func:`render`, with the Agg backend, so importing this module loads no plotting, torch or
transformers code.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monte.errors import error
from monte.ledger.predicates import is_admissible, is_test_read
from monte.ledger.records import Measurement, RunRow
from monte.ledger.rules import baseline, checkpoints
from monte.result_type import Result
from monte.stats.paired import format_interval
from monte.status import (
    by_run,
    cycles,
    descent_paths,
    first_dev_evals,
    path_checkpoints,
    render_path,
)

if TYPE_CHECKING:
    from monte.workspace import Workspace

FORMATS = ("png", "svg", "pdf")
NO_DEV_EVAL = "no checkpoint has a dev eval yet"

VERDICT_STYLE: dict[str, dict[str, Any]] = {
    "ok": {"marker": "o", "color": "#2ca02c", "markersize": 10, "label": "cycle ok (Δ > 0, significant)"},
    "STRIKE": {"marker": "x", "color": "#d62728", "markersize": 11, "markeredgewidth": 2.5,
               "label": "cycle STRIKE (not significantly > 0)"},
    "unjudged": {"marker": "o", "color": "#7f7f7f", "markersize": 10, "markerfacecolor": "none",
                 "markeredgewidth": 1.5, "label": "cycle unjudged (unpaired)"},
}
TEST_COLOR = "#9467bd"


def check_out(out: Path | str) -> Path:
    """Refuse an output path monte cannot write a figure to (before anything is read)."""
    path = Path(out)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise error("E_USAGE", f"--out {str(out)!r} is not a .png, .svg or .pdf file; the format "
                    "comes from the extension", "name the file FILE.png (or .svg, .pdf)")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise error("E_NOT_FOUND", f"the folder {str(parent)!r} for --out does not exist",
                    f"create it first (mkdir -p {parent}) or write the figure elsewhere")
    if path.is_dir():
        raise error("E_USAGE", f"--out {str(out)!r} is a folder", "name a file: FILE.png")
    return path


def collect(meas: Measurement, rows: Sequence[RunRow]) -> dict[str, Any]:
    """The figure's data, JSON types only (pure: no I/O, no matplotlib)."""
    cks = checkpoints(rows)
    paths = descent_paths(cks)
    dev_exams = sorted(e for e, x in meas.exams.items() if "dev" in x.splits)
    cycle_rows = cycles(rows, cks, paths, dev_exams)
    cohorts = sorted({r.cohort for r in rows if r.cohort})
    series: list[dict[str, Any]] = []
    first_evals = first_dev_evals(rows)
    runs = by_run(cks)
    for exam in dev_exams:
        for path in paths:
            points = []
            for ck in path_checkpoints(path, runs):
                first = first_evals.get((ck.run, ck.step, exam))
                if first is None:
                    continue
                d = first.delta or {}
                if d.get("delta") is None:  # no baseline to measure against
                    continue
                points.append({"checkpoint": ck.ref, "step": ck.step, "eval": first.run,
                               "delta": d["delta"], "lower": d.get("lower"), "upper": d.get("upper"),
                               "paired": bool(d.get("paired")),
                               "verdict": d.get("verdict") if d.get("paired") else "unjudged"})
            if not points:
                continue
            cohort = next(c.cohort for c in cks if c.run == path[-1].run)
            from_base = path[0].parent is None and baseline(rows, cohort, exam, "dev") is not None
            series.append({"exam": exam, "lineage": render_path(path), "leaf": path[-1].run,
                           "cohort": cohort, "from_base": from_base, "points": points})
    baselines = []
    for cohort in cohorts:
        for exam in dev_exams:
            b = baseline(rows, cohort, exam, "dev")
            if b is not None:
                baselines.append({"cohort": cohort, "exam": exam, "run": b.run, "score": b.score})
    test_reads = []
    for r in rows:  # every non-smoke test eval spent a touch, whatever became of it
        if not is_test_read(r):
            continue
        t = r.plan.get("target", {})
        d = (r.delta or {}) if is_admissible(r) else {}
        test_reads.append({
            "run": r.run, "exam": r.exam, "cohort": r.cohort, "role": r.role, "status": r.status,
            "step": 0 if t.get("kind") == "base" else int(t.get("step", r.step)),
            "target": "base" if t.get("kind") == "base" else f"{t.get('run')}@{t.get('step')}",
            "score": r.score if is_admissible(r) else None, "delta": d.get("delta"),
            "lower": d.get("lower"), "upper": d.get("upper"), "paired": d.get("paired"),
            "verdict": d.get("verdict") if d.get("paired") else None})
    unique = {(s["exam"], p["checkpoint"]) for s in series for p in s["points"]}
    return {"experiment": meas.experiment, "exams": dev_exams, "cohorts": cohorts, "series": series,
            "points": len(unique), "cycles": cycle_rows, "baselines": baselines, "test_reads": test_reads}


@dataclass(frozen=True)
class PlotWritten(Result):
    """``monte plot``: the file, its format, and what the figure shows (``note``: why a figure is
    empty, None otherwise)."""

    path: str
    format: str
    experiment: str
    exams: list[str]
    paths: int
    points: int
    lineage: list[str]
    cycles: dict[str, int]
    test_reads: int
    claims: list[str]
    note: str | None


def plot_experiment(*, out: Path | str, experiment: str | None = None,
                    ws: Workspace | None = None) -> PlotWritten:
    """Read the ledger tip, draw the figure to ``out``; what was drawn, as a dict."""
    from monte.ledger.experiment import Ledger
    from monte.runs import experiment_name, read_rows
    from monte.workspace import open_workspace

    path = check_out(out)
    ws = ws or open_workspace(require_data_root=False)
    exp = experiment_name(ws, experiment)
    ledger = Ledger(ws.store, exp)
    snap = ledger.snapshot()
    data = collect(ledger.measurement(snap), read_rows(ledger, snap))
    render(data, path)
    verdicts = {"ok": 0, "STRIKE": 0, "unjudged": 0}
    for c in data["cycles"]:
        verdicts[c["verdict"]] = verdicts.get(c["verdict"], 0) + 1
    return PlotWritten(
        path=str(path), format=path.suffix.lower().lstrip("."), experiment=data["experiment"],
        exams=data["exams"], paths=len(data["series"]), points=data["points"],
        lineage=[s["lineage"] for s in data["series"]], cycles=verdicts,
        test_reads=len(data["test_reads"]),
        claims=[t["target"] for t in data["test_reads"] if t["role"] == "claim"],
        note=None if data["points"] else NO_DEV_EVAL,
    )


# --- drawing ---------------------------------------------------------------------------------


def _short(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width // 2 - 2] + " … " + text[-(width // 2 - 2):]


def _fmt(d: dict[str, Any]) -> str:
    s = f"Δ {d['delta']:+.3f}"
    if d.get("lower") is not None and d.get("upper") is not None:
        s += f" {format_interval(d['lower'], d['upper'], 3)}"
    return s + (f" {d['verdict']}" if d.get("verdict") else "")


def _yerr(p: dict[str, Any]) -> list[list[float]] | None:
    if p.get("lower") is None or p.get("upper") is None:
        return None
    return [[max(p["delta"] - p["lower"], 0.0)], [max(p["upper"] - p["delta"], 0.0)]]


def _dodge(series: Sequence[dict[str, Any]], width: float) -> tuple[dict[str, float], dict[str, int], dict[int, int]]:
    """Checkpoints that share a step (branches) sit side by side, ``width`` apart, so their
    markers and intervals do not hide each other: x of each checkpoint, its index in its step's
    group, and each step's group size."""
    groups: dict[int, list[str]] = {}
    for s in series:
        for p in s["points"]:
            group = groups.setdefault(p["step"], [])
            if p["checkpoint"] not in group:
                group.append(p["checkpoint"])
    x_of, index = {}, {}
    for step, refs in groups.items():
        for i, ref in enumerate(refs):
            x_of[ref] = step + (i - (len(refs) - 1) / 2) * width
            index[ref] = i
    return x_of, index, {step: len(refs) for step, refs in groups.items()}


def render(data: dict[str, Any], out: Path) -> None:
    """Draw ``collect``'s data to ``out`` (format from the extension), atomically."""
    try:
        import matplotlib
    except ImportError as e:  # the light install: the refusal names the extra's own pip line
        from monte.extras import missing

        refusal = missing(ModuleNotFoundError(str(e), name="matplotlib"))
        assert refusal is not None
        raise refusal from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    exams = data["exams"] or ["(no dev exam)"]
    many_cohorts = len(data["cohorts"]) > 1
    colors = plt.get_cmap("tab10").colors  # type: ignore[attr-defined]
    fig, axes = plt.subplots(len(exams), 1, figsize=(11, 1.0 + 4.6 * len(exams)), sharex=True,
                             squeeze=False)
    # legend: paths first, then the markers, then the test reads
    legend: dict[str, dict[str, Any]] = {"path": {}, "mark": {}, "test": {}}
    cycle_of = {(c["exam"], c["checkpoint"]): c["verdict"] for c in data["cycles"]}
    steps = [0] + [p["step"] for s in data["series"] for p in s["points"]] + [
        t["step"] for t in data["test_reads"]]
    xmax = max(steps) or 50  # an empty figure still reads as a step axis
    width = 0.02 * xmax
    color_of: dict[str, Any] = {}
    for s in data["series"]:  # one colour per path, the same in every exam's panel
        color_of.setdefault(s["lineage"], colors[len(color_of) % len(colors)])
    try:
        for row, exam in enumerate(exams):
            ax = axes[row][0]
            ax.axhline(0.0, color="#999999", linestyle="--", linewidth=0.9, zorder=1)
            series = [s for s in data["series"] if s["exam"] == exam]
            x_of, index, group = _dodge(series, width)
            drawn: set[str] = set()
            for i, s in enumerate(series):
                color = color_of[s["lineage"]]
                xs = ([0.0] if s["from_base"] else []) + [x_of[p["checkpoint"]] for p in s["points"]]
                ys = ([0.0] if s["from_base"] else []) + [p["delta"] for p in s["points"]]
                label = _short(s["lineage"]) + (f"  (cohort {s['cohort'][:10]})" if many_cohorts else "")
                (line,) = ax.plot(xs, ys, color=color, linewidth=2.4 - 0.4 * min(i, 3), marker=".",
                                  markersize=6, zorder=2 + i * 0.01, alpha=0.9)
                legend["path"].setdefault(label, line)
                for p in s["points"]:  # one error bar per checkpoint, in the first path's colour
                    ref = p["checkpoint"]
                    if ref in drawn:
                        continue
                    drawn.add(ref)
                    err = _yerr(p)
                    if err is not None:
                        ax.errorbar([x_of[ref]], [p["delta"]], yerr=err, color=color, capsize=5,
                                    linewidth=1.3, alpha=0.8, zorder=3)
                    verdict = cycle_of.get((exam, ref))
                    if verdict in VERDICT_STYLE:
                        style = dict(VERDICT_STYLE[verdict])
                        vlabel = style.pop("label")
                        (m,) = ax.plot([x_of[ref]], [p["delta"]], linestyle="none", zorder=5, **style)
                        legend["mark"].setdefault(vlabel, m)
                    ax.annotate(ref.split("@")[0], (x_of[ref], p["delta"]), textcoords="offset points",
                                xytext=(8, 5 + 11 * index[ref]), fontsize=7, color=color, zorder=4,
                                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})
            if any(b["exam"] == exam for b in data["baselines"]):
                (b,) = ax.plot([0], [0.0], marker="s", color="black", markersize=8, linestyle="none",
                               zorder=6)
                legend["mark"].setdefault("baseline (dev@0: Δ 0 by definition)", b)
            if not series:
                note = NO_DEV_EVAL if data["baselines"] else NO_DEV_EVAL + " (and no dev baseline)"
                ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center",
                        fontsize=13, color="#555555", style="italic")
            _draw_test_reads(ax, data, exam, xmax=xmax, group=group, width=width, handles=legend["test"],
                             Line2D=Line2D)
            ax.set_ylabel("dev Δ vs cohort baseline\n(95% interval)")
            ax.set_title(f"exam {exam} (dev)", fontsize=10, loc="left")
            ax.grid(True, alpha=0.25)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlim(-0.06 * xmax, xmax * 1.12)
        axes[-1][0].set_xlabel("absolute step")
        fig.suptitle(f"monte plot: experiment {data['experiment']}: dev delta by lineage", fontsize=13)
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        handles = {**legend["path"], **legend["mark"], **legend["test"]}
        fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=2, fontsize=8.5, frameon=False)
        fmt = out.suffix.lower().lstrip(".")
        meta: dict[str, Any] = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt, {})
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        try:
            fig.savefig(tmp, format=fmt, dpi=110, metadata=meta, bbox_inches="tight", pad_inches=0.2)
            os.replace(tmp, out)
        except OSError as e:  # /proc, a read-only or full disk: the folder exists but takes no file
            raise error("E_STORAGE", f"--out {str(out)!r} cannot be written: {e.strerror or type(e).__name__}; "
                        "nothing was written", "name a file in a folder you can write to") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    finally:
        plt.close(fig)


def _draw_test_reads(ax: Any, data: dict[str, Any], exam: str, *, xmax: int, group: dict[int, int],
                     width: float, handles: dict[str, Any], Line2D: Any) -> None:
    """Test reads of this exam (all of them when the test exam is not a dev exam's name).
    ``Line2D`` is matplotlib's class, passed in to keep the import lazy; ``group`` and ``width``
    place the claim's star just right of the (dodged) dev points at its step."""
    reads = [t for t in data["test_reads"]
             if t["exam"] == exam or t["exam"] not in data["exams"]]
    many_cohorts = len(data["cohorts"]) > 1
    trans = ax.get_xaxis_transform()  # x in data, y in axes fraction
    for k, t in enumerate(reads):
        claim = t["role"] == "claim"
        ax.axvline(t["step"], color=TEST_COLOR, linestyle="-." if claim else ":", linewidth=1.4, zorder=1)
        text = f"claim {t['target']}" if claim else ("test@0" if t["role"] == "baseline" else "test read")
        if many_cohorts:
            text += f" (cohort {t['cohort'][:8]})"
        if t["status"] != "succeeded":
            text += f" ({t['status']})"
        elif claim and t.get("delta") is not None:
            text += "\ntest " + _fmt(t)
        elif t.get("score") is not None:
            text += f"\nscore {t['score']:.3f}"
        right = t["step"] > 0.5 * xmax
        y = 0.03 + 0.12 * (k % 3) if claim else 0.97 - 0.12 * (k % 3)  # claims low, test@0 high
        ax.text(t["step"] + (-0.01 if right else 0.01) * xmax, y, text,
                transform=trans, fontsize=7.5, color=TEST_COLOR, ha="right" if right else "left",
                va="bottom" if claim else "top", bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": TEST_COLOR, "alpha": 0.9},
                zorder=7)
        if claim and t.get("delta") is not None:  # beside the dev points of its step
            ax.errorbar([t["step"] + ((group.get(t["step"], 0) - 1) / 2 + 1) * width], [t["delta"]], yerr=_yerr(t), color=TEST_COLOR, capsize=5,
                        linewidth=1.3, marker="*", markersize=14, linestyle="none", zorder=6)
            handles.setdefault("claim: test Δ vs test@0 (95% interval)",
                               Line2D([], [], color=TEST_COLOR, marker="*", markersize=12, linestyle="none"))
    if reads:
        handles.setdefault("test reads (test@0 dotted, claim dash-dot)",
                           Line2D([], [], color=TEST_COLOR, linestyle=":", linewidth=1.4))
