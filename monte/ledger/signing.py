"""SSH signatures: the one way monte signs bytes (``ssh-keygen -Y sign``), for a claim bundle's
Statement and, where the repository asks git to sign commits with SSH, for monte's own commits.

A repository whose git config says ``gpg.format = ssh``, ``commit.gpgSign = true`` and
``user.signingKey = PATH`` (a private key, or the public half of one loaded in ssh-agent) gets
its ledger, lineage and base commits signed as ``git commit -S`` would sign them (namespace
``git``), so ``git verify-commit`` (with ``gpg.ssh.allowedSignersFile``) holds on them.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from dulwich.repo import Repo

from monte.errors import error

GIT_NAMESPACE = "git"


def ssh_keygen() -> str:
    exe = shutil.which("ssh-keygen")
    if exe is None:
        raise error("E_NOT_FOUND", "ssh-keygen is not on PATH: monte signs with OpenSSH's ssh-keygen",
                    "install OpenSSH's client (Debian: `apt-get install openssh-client`)")
    return exe


def ssh_sign(key: Path, data: bytes, namespace: str) -> bytes:
    """An armored SSH signature (SSHSIG) of ``data`` under ``namespace`` by ``key``."""
    with tempfile.TemporaryDirectory(prefix="monte-sign-") as tmp:
        msg = Path(tmp) / "message"
        msg.write_bytes(data)
        r = subprocess.run([ssh_keygen(), "-q", "-Y", "sign", "-f", str(key), "-n", namespace, str(msg)],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        sig = Path(tmp) / "message.sig"
        if r.returncode != 0 or not sig.is_file():
            raise error("E_USAGE", f"ssh-keygen could not sign with {key}: {(r.stderr or r.stdout).strip()[-300:]}",
                        "use an SSH private key without a passphrase prompt (or one loaded in ssh-agent), "
                        "readable by you only (chmod 600)")
        return sig.read_bytes()


def commit_signing_key(repo: Repo) -> Path | None:
    """The key git would sign this repository's commits with over SSH, or None (no signing)."""
    cfg = repo.get_config_stack()

    def get(section: bytes, name: bytes) -> str | None:
        try:
            return cfg.get((section,), name).decode()
        except KeyError:
            return None

    if (get(b"gpg", b"format") or "").lower() != "ssh":
        return None
    if (get(b"commit", b"gpgsign") or "").lower() not in ("true", "yes", "on", "1"):
        return None
    key = get(b"user", b"signingkey")
    if not key:
        raise error("E_USAGE", "git is set to sign commits with SSH (gpg.format ssh, commit.gpgSign) but names no "
                    "key", "set one: `git config user.signingKey ~/.ssh/id_ed25519`")
    if key.startswith("key::"):
        raise error("E_USAGE", "monte signs with a key file, not a literal `key::` signingKey",
                    "set `git config user.signingKey PATH` to the key's file")
    return Path(key).expanduser()
