"""The vault ref: one commit per freeze manifest (``refs/heads/monte/vault``)."""

from __future__ import annotations

from monte.errors import error
from monte.ledger.refs import VAULT_REF
from monte.ledger.store import Change, Snapshot, Store, parse_trailers
from monte.ledger.views import VAULT_FOLDERS, manifest_path
from monte.manifest import Manifest, parse_manifest


class Vault:
    def __init__(self, store: Store) -> None:
        self.store = store

    def snapshot(self) -> Snapshot:
        return self.store.snapshot(VAULT_REF)

    def get(self, kind: str, name: str, snap: Snapshot | None = None) -> Manifest | None:
        snap = snap or self.snapshot()
        raw = snap.read(manifest_path(kind, name))
        return parse_manifest(raw, f"{VAULT_REF}:{manifest_path(kind, name)}") if raw else None

    def names(self, kind: str, snap: Snapshot | None = None) -> list[str]:
        snap = snap or self.snapshot()
        return sorted(snap.listdir(VAULT_FOLDERS[kind]))

    def record(self, manifest: Manifest, check=None, trailers: dict[str, str] | None = None) -> bytes:  # type: ignore[no-untyped-def]
        """Commit ``manifest``; refuse if the name is taken (re-checked after a lost race).

        ``check(snapshot)`` may refuse too (e.g. the Dataset/Environment namespace rule).
        ``trailers`` are added to the commit message (the folder's DVC hash, ``Monte-Dvc-*``).
        """

        def build(snap: Snapshot) -> Change:
            if snap.exists(manifest_path(manifest.kind, manifest.name)):
                raise name_taken(manifest.kind, manifest.name, "the vault ref")
            if check:
                check(snap)
            return Change(
                summary=f"freeze {manifest.kind} {manifest.name}: {len(manifest.files)} file(s)",
                writes={manifest_path(manifest.kind, manifest.name): manifest.dumps()},
                trailers={
                    "Monte-Event": "freeze",
                    "Monte-Kind": manifest.kind,
                    "Monte-Name": manifest.name,
                    "Monte-Fingerprint": manifest.fingerprint,
                    **(trailers or {}),
                },
            )

        return self.store.append(VAULT_REF, build)

    def trailers(self) -> dict[tuple[str, str], dict[str, str]]:
        """(kind, name) -> the trailers of the commit that recorded that freeze (a walk of the
        vault ref's history: one commit per freeze)."""
        out: dict[tuple[str, str], dict[str, str]] = {}
        tip = self.store.tip(VAULT_REF)
        for entry in self.store.repo.get_walker(include=[tip]) if tip is not None else []:
            t = parse_trailers(entry.commit.message)
            if t.get("Monte-Event") == "freeze" and "Monte-Kind" in t and "Monte-Name" in t:
                out.setdefault((t["Monte-Kind"], t["Monte-Name"]), t)
        return out


def name_taken(kind: str, name: str, where: str):  # type: ignore[no-untyped-def]
    noun = "an environment" if kind == "environment" else "a dataset"
    cmd = "env add" if kind == "environment" else "dataset add"
    return error(
        "E_NAME_TAKEN",
        f"{noun} named {name!r} is already frozen ({where}); frozen means frozen",
        f"freeze under another name (`monte {cmd} ... --as NEW_NAME`)"
        if kind == "environment" else "freeze under another NAME",
    )
