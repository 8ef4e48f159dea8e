from __future__ import annotations

from typing import TYPE_CHECKING

import click

from monte.cli.output import handled, table

if TYPE_CHECKING:
    from monte.api.shapes import BoxDown, BoxStatus, BoxUp


@click.group()
def box() -> None:
    """Ephemeral Lambda GPU boxes: up, status, down.

    All three read the Lambda API key from MONTE_LAMBDA_KEY, or from the 1Password item
    MONTE_LAMBDA_KEY_OP names.
    """


def _progress(line: str) -> None:
    click.echo(line, err=True)  # stderr: with --json, stdout holds the one document


def _up(r: BoxUp) -> None:
    b = r.box
    click.echo(f"box {b['name']} ({b['id']}) is up: {b['type']} in {b['region']}, ip {b['ip']}")
    if b["cold"]:
        click.echo("  cold: no file system attached; a cold box cannot serve a real run")
    else:
        click.echo(f"  warm: file system {', '.join(b['file_systems'])} attached (the data root)")
    w = r.watchdog
    idle = "idle check off (--keep-alive)" if w["keep_alive"] else f"idle {w['idle_minutes']} min"
    click.echo(f"  watchdog armed: {idle}, hard TTL {w['ttl_hours']} h")
    for note in r.notes:
        if not (b["cold"] and note.startswith("a cold box")):
            click.echo(f"  note: {note}")
    click.echo(f"  identity: {r.identity_file}")
    click.echo(f"  ssh ubuntu@{b['ip']}")
    click.echo(f"  stop it:  monte box down {b['name']}")


@box.command()
@click.option("--type", "type_", metavar="T", help="Lambda instance type (default gpu_1x_h100_pcie).")
@click.option("--region", metavar="R", help="Look here first (default: the data root's region).")
@click.option("--cold", is_flag=True, help="Attach no file system (cannot serve a real run).")
@click.option("--keep-alive", is_flag=True,
              help="Turn the idle check off, for a box you drive by hand (the 12 h TTL stays).")
@click.option("--ssh-key", metavar="K",
              help="Lambda SSH key name (default: MONTE_LAMBDA_SSH_KEY, else the account's only key).")
@handled(_up)
def up(type_: str | None, region: str | None, cold: bool, keep_alive: bool,
       ssh_key: str | None) -> object:
    """Launch a box, wait until it is active, and arm its watchdog.

    Capacity in the data root's home region first (the region of the Lambda file system
    MONTE_LAMBDA_FILESYSTEM names), then anywhere. The watchdog terminates the box through
    Lambda's API after 45 idle minutes or 12 hours.
    """
    from monte import api

    return api.box_up(type_=type_, region=region, cold=cold, keep_alive=keep_alive,
                      ssh_key=ssh_key, on_progress=_progress)


def _status(r: BoxStatus) -> None:
    rows = []
    for i in r.instances:
        own, age, over = i.owner == "monte", i.age_hours, i.over_ttl
        rows.append({**i.to_dict(),
                     "age": f"{age:.1f}h" if age is not None else ("?" if own else None),
                     "over_ttl": ("OVER TTL" if over else "no") if over is not None
                     else ("?" if own else None)})
    table(rows, ["name", "id", "owner", "status", "type", "region", "ip", "age", "over_ttl"],
          title="instances")
    for p in r.stale_identity_files:
        click.echo(f"note: {p} names an instance that is no longer on the account")


@box.command()
@handled(_status)
def status() -> object:
    """Every instance on the Lambda account: monte's own with age and TTL, others as foreign."""
    from monte import api

    return api.box_status()


def _down(r: BoxDown) -> None:
    t = r.terminated
    verb = "was already terminating" if r.already_terminating else "is terminating"
    click.echo(f"box {t.name} ({t.id}) {verb}")
    if r.identity_file_removed:
        click.echo(f"  removed {r.identity_file_removed}")


@box.command()
@click.argument("instance", required=False)
@handled(_down)
def down(instance: str | None) -> object:
    """Terminate one of monte's boxes through Lambda's API (default: the only one running).

    INSTANCE is a box's name (monte-...) or id. Refuses an instance monte did not launch.
    """
    from monte import api

    return api.box_down(instance=instance)
