from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from monte.cli import complete
from monte.cli.output import confirm_plan, handled, is_tty, progress
from monte.cli.remote import remote_options, submitted

if TYPE_CHECKING:
    from monte.api.shapes import Rerun


def _human(r: Any) -> None:
    if r is None:
        return
    from monte.api.shapes import Submitted

    if isinstance(r, Submitted):
        submitted(r)
        return
    row = r.run
    cks = ", ".join(f"{row['run']}@{c['step']}" for c in row["checkpoints"]) or "none (smoke)"
    click.echo(f"{row['run']}  {row['plan']['recipe']['algorithm']}:{row['plan']['source']}  {row['status']}"
               f"  checkpoints: {cks}")
    c = getattr(r, "curve", None)
    if c:  # what the chunk learned, in the numbers an agent decides on (monte.runs.curve)
        click.echo(f"  loss {c['first_loss']:.4f} -> {c['last_loss']:.4f} (min {c['min_loss']:.4f} at step "
                   f"{c['min_loss_step']}), grad norm {_num(c['grad_norm_last'])}, samples {c['samples']}, "
                   f"epochs {_num(c['epochs'], '.2f')}, {_num(c['seconds'], '.1f')} s")
        if c.get("path_samples") is not None and len(c.get("path_batches") or ()) > 1:
            batches = c["path_batches"]
            each = (f"batch {batches[0]}" if len(set(batches)) == 1
                    else "batches " + ", ".join(str(b) for b in batches) + ", oldest first")
            click.echo(f"  samples along its path from the base: {c['path_samples']} "
                       f"({len(batches)} chunks; {each})")
            if c.get("path_epochs"):
                click.echo("  epochs along its path: " + "; ".join(_epochs(e) for e in c["path_epochs"]))


def _epochs(e: dict[str, Any]) -> str:
    """``parity-sft 0.625 (160 samples / 256 rows)``: an environment's unit is the prompt."""
    seen, rows = ("prompts", "curriculum items") if e["kind"] == "environment" else ("samples", "rows")
    if e["epochs"] is None:
        why = "not on this data root" if e["rows"] is None else "its rows are packed into sequences"
        return f"{e['source']} unknown ({why})"
    return f"{e['source']} {e['epochs']:.3g} ({e['seen']} {seen} / {e['rows']} {rows})"


def _num(v: Any, spec: str = ".4f") -> str:
    return "-" if v is None else format(v, spec)


@click.command()
@click.option("--recipe", required=True, metavar="R", shell_complete=complete.recipes, help="A recipe name (see `monte config`) or a YAML path.")
@click.option("--source", required=True, metavar="S", shell_complete=complete.sources, help="A frozen Dataset (sft, dpo) or trainable Environment (grpo, rloo, distillation).")
@click.option("--parent", metavar="RUN@STEP", shell_complete=complete.checkpoints, help="Continue (same recipe) or warm-start (other recipe) from it.")
@click.option("--from-base", is_flag=True, help="Open a fresh branch from the base model at step 0.")
@click.option("--model", metavar="M", shell_complete=complete.models, help="The base model (default: the recipe's, then the experiment's).")
@click.option("--experiment", "-e", metavar="EXP", help="Default: the only experiment.")
@click.option("--smoke", is_flag=True,
              help="A 3-step micro-chunk from the base model that is never evidence: it states neither --parent "
              "nor --from-base (it never enters the tree).")
@click.option("--push", is_flag=True,
              help="Upload the results to the results bucket after each transition, and a real chunk's "
              "checkpoint to the hub repo MONTE_HUB_REPO (or `hub:` in .monte.yaml).")
@click.option("--processes", type=int, default=None, metavar="N",
              help="Ranks per node: the chunk runs under torchrun (accelerate launch with GPUs or "
              "--accelerate-config), gloo on CPU. The recipe's batch is the chunk's, split over the ranks.")
@click.option("--nodes", type=int, default=1, show_default=True, metavar="M",
              help="Nodes of --processes ranks each, meeting at a rendezvous on 127.0.0.1 (loopback nodes).")
@click.option("--accelerate-config", metavar="NAME|FILE",
              help="A profile monte ships (cpu-ddp: gloo on CPU; multi-gpu: DDP; fsdp: FSDP2; zero2: DeepSpeed "
              "ZeRO-2) or an accelerate YAML; frozen into the plan by content and sha256, the ranks read the "
              "frozen copy.")
@click.option("--hosts", metavar="H1,H2", help="One node per machine over SSH ([USER@]HOST[:PORT] each; key: "
              "--ssh-key or MONTE_SSH_KEY_FILE), the rendezvous on the first; every host sees this repository at "
              "the same path (shared filesystem) and this Python. Only this process records.")
@click.option("--port", type=int, metavar="PORT", help="The rendezvous port (default: a free one).")
@remote_options
@click.option("--adopt", hidden=True, metavar="RUN", help="(on a box) run the job the laptop submitted as RUN.")
@click.option("--yes", "-y", is_flag=True, help="Skip the confirmation question.")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@handled(_human)
def train(recipe: str, source: str, parent: str | None, from_base: bool, model: str | None,
          experiment: str | None, smoke: bool, push: bool, processes: int | None, nodes: int,
          accelerate_config: str | None, port: int | None, hosts: str | None, remote: bool, provider: str, host: str | None,
          ssh_key: str | None, adopt: str | None, yes: bool, dry_run: bool, as_json: bool) -> Any:
    """Train one chunk (the experiment's steps_per_chunk steps, 50 by default)."""
    from monte import api

    api.check_remote(remote=remote, push=push, dry_run=dry_run, provider=provider, host=host)
    plan = api.plan_train(recipe=recipe, source=source, parent=parent, from_base=from_base, model=model,
                          smoke=smoke, push=push, experiment=experiment, adopt=adopt, remote=remote,
                          processes=processes if processes is not None or accelerate_config else 1, nodes=nodes,
                          accelerate_config=accelerate_config, port=port, hosts=hosts,
                          ssh_key=ssh_key if hosts else None)
    if remote:
        if not confirm_plan([*plan.lines(), f"  remote: submit to {host or 'a Lambda box'}"], yes=yes,
                            dry_run=False, as_json=as_json):
            return None
        return api.submit(plan=plan, provider=provider, host=host, ssh_key=ssh_key)
    if not confirm_plan(plan.lines(), yes=yes, dry_run=dry_run, as_json=as_json):
        return {"dry_run": True, "plan": plan.model_dump()} if as_json else None
    return api.run_train(plan, on_progress=progress("train", "steps") if is_tty() and not as_json else None)


@click.command()
@click.argument("checkpoint", metavar="RUN@STEP", shell_complete=complete.checkpoints)
@click.option("--dest", required=True, type=click.Path(file_okay=False), help="The folder to export into (new).")
@click.option("--confirm", "confirm_", required=True, metavar="RUN@STEP", help="The checkpoint, typed out in full.")
@click.option("--experiment", "-e", metavar="EXP", help="Default: the only experiment.")
@click.option("--from-hub", is_flag=True,
              help="Export the hub copy the checkpoint's lineage commit records (a --push chunk's), verified.")
@handled(lambda r: click.echo(f"promoted {r.checkpoint} to {r.dest}: {r.files} file{'s' if r.files != 1 else ''} "
                              f"(the model card included), {r.bytes:,} bytes ({r.disk / 2**20:.1f} MiB on disk), "
                              "every sha256 verified"))
def promote(checkpoint: str, dest: str, confirm_: str, experiment: str | None, from_hub: bool) -> Any:
    """Export a succeeded training checkpoint's servable folder, sha256-verified."""
    from pathlib import Path

    from monte import api

    return api.promote(ref=checkpoint, dest=Path(dest), confirm=confirm_, experiment=experiment,
                       from_hub=from_hub)


def _rerun_human(r: Rerun) -> None:
    import shlex

    click.echo("# the chunk's command (the launch record of " + r.run + ")")
    for k, v in sorted(r.env.items()):
        click.echo(f"export {k}={shlex.quote(v)}")
    click.echo(shlex.join(r.command))
    if r.ranks:
        click.echo("# which starts, one per node (PORT: a free rendezvous port, or --port):")
        for argv in r.ranks:
            click.echo("#   " + shlex.join(argv))
    checks = [f"recipe sha256 {r.recipe_sha256}"] + ([f"accelerate config sha256 {r.config_sha256}"]
                                                     if r.config_sha256 else [])
    versions = ", ".join(f"{k} {v}" for k, v in sorted(r.versions.items()) if v)
    click.echo("# recorded: " + "; ".join(checks) + (f"; versions: {versions}" if versions else ""))
    if not r.recorded:
        click.echo("# this row predates the launch record: it ran in one process")


@click.command()
@click.argument("run", metavar="[EXP/]RUN", shell_complete=complete.runs)
@click.option("--dry-run", is_flag=True, help="Print the command and environment (the only mode).")
@click.option("--experiment", "-e", metavar="EXP", shell_complete=complete.experiments,
              help="The run's experiment (default: the only one; or write EXP/RUN).")
@handled(_rerun_human)
def rerun(run: str, dry_run: bool, experiment: str | None, as_json: bool) -> Any:
    """Print the exact command and environment that launch a train run's chunk again."""
    from monte import api
    from monte.errors import error

    if not dry_run:
        raise error("E_USAGE", "`monte rerun` prints the launch; it runs nothing itself",
                    "pass --dry-run, then run the printed command")
    return api.rerun(ref=run, experiment=experiment)
