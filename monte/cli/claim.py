"""``monte claim``: export a final claim as a signed bundle, and check one without the repository."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from monte.cli import complete
from monte.cli.output import experiment_option, handled

if TYPE_CHECKING:
    from monte.api.shapes import ClaimExported, ClaimVerified


@click.group()
def claim() -> None:
    """A final claim anyone can check: a signed bundle that verifies without the repository.

    \b
    Example:
      monte claim export RUN --out claim --key ~/.ssh/id_ed25519 --card promoted
      monte claim verify claim --allowed-signers allowed_signers --weights promoted
    """


def _exported(r: ClaimExported) -> None:
    total = sum(r.files.values())
    click.echo(f"exported the final claim to {r.out}: {len(r.files)} files, {total / 1e6:.2f} MB")
    click.echo(f"statement sha256 {r.statement_sha256}")
    if r.card:
        click.echo(f"the model card in {r.card} names it")
    click.echo("a reader adds this line to their allowed_signers file (from a source they trust):")
    click.echo(f"  {r.signer}")


@claim.command()
@click.argument("run", shell_complete=complete.runs)
@experiment_option
@click.option("--out", "out", required=True, metavar="DIR", help="A new folder for the bundle.")
@click.option("--key", "key", required=True, metavar="SSH_PRIVATE_KEY", help="The SSH key that signs it.")
@click.option("--identity", metavar="PRINCIPAL", help="The signer's name in allowed_signers (default: git's "
              "user.email).")
@click.option("--card", metavar="DIR", help="A promoted folder of the checkpoint: its files are proven and its "
              "model card names the claim.")
@handled(_exported)
def export(run: str, experiment_opt: str | None, out: str, key: str, identity: str | None,
           card: str | None) -> Any:
    """Export the final claim RUN (EXP/RUN) as a signed in-toto Statement with its evidence.

    \b
    Example:
      monte claim export exp/RUN --out claim --key ~/.ssh/id_ed25519 --card promoted
    """
    from pathlib import Path

    from monte import api

    return api.claim_export(ref=run, out=Path(out), key=Path(key).expanduser(), experiment=experiment_opt,
                            identity=identity, card=Path(card) if card else None)


def _verified(r: ClaimVerified) -> None:
    click.echo(f"ok: {r.experiment} final claim on {r.checkpoint}: delta {r.delta} {r.verdict}")
    click.echo(f"signed by {r.signer}, key {r.fingerprint} (statement sha256 {r.statement_sha256})")
    click.echo(f"the bundled ledger keeps every rule ({r.records} record(s)) and derives every field of the "
               f"statement; the seal holds {r.test_reads} test reads of that exam in that cohort: test@0, then "
               "the claim")
    click.echo(f"the test split was read {r.repository_reads} time(s) in the repository, over "
               f"{r.repository_cohorts} cohort(s)")
    if r.recovered:
        click.echo(f"recovered: {', '.join(r.recovered)} recorded by `monte recover` from a kept result, not by "
                   "the process that generated it")
    click.echo(f"weights: {r.weights}")


@claim.command()
@click.argument("folder", type=click.Path())
@click.option("--allowed-signers", "allowed", required=True, metavar="FILE",
              help="ssh-keygen's allowed_signers: the keys you trust.")
@click.option("--weights", metavar="PATH", help="The model folder: each file proven against the claim.")
@click.option("--signer", metavar="FPR", help="Accept only this key (SHA256:..., as `ssh-keygen -l` prints it).")
@click.option("--grader-key", metavar="PUBKEY", help="The team's grader public key (the line, or key.pub's path): "
              "test@0 and the claim must carry its signature (docs/grader.md).")
@handled(_verified)
def verify(folder: str, allowed: str, weights: str | None, signer: str | None, grader_key: str | None) -> Any:
    """Check a claim bundle with its files alone: no repository, no network.

    \b
    Example:
      monte claim verify claim --allowed-signers allowed_signers --weights promoted
    """
    from pathlib import Path

    from monte import api

    key = Path(grader_key).read_text() if grader_key and Path(grader_key).is_file() else grader_key
    return api.claim_verify(folder=Path(folder), allowed_signers=Path(allowed),
                            weights=Path(weights) if weights else None, signer=signer,
                            grader_key=" ".join(key.split()[:2]) if key else None)
