"""A claim's signatures: the one serialization of its JSON files, DSSE's pre-authentication
encoding, ssh-keygen's armor of an SSHSIG blob (refusing any other), and signing and checking with
``ssh-keygen`` against an ``allowed_signers`` file, under the claim's own namespace."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from monte.errors import error

NAMESPACE = "monte-claim"


def canonical(obj: Any) -> bytes:
    """The one serialization of a claim's JSON files (sorted keys, no spaces, a final newline):
    verify re-serializes what it parsed and compares bytes, so no edit hides in whitespace."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding of a payload: what a DSSE signature signs."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


_ARMOR_BEGIN = b"-----BEGIN SSH SIGNATURE-----"
_ARMOR_END = b"-----END SSH SIGNATURE-----"


def unarmor(armored: bytes) -> bytes:
    """The SSHSIG blob inside ssh-keygen's armor; refuses (ValueError) any armor that is not
    byte for byte the one ssh-keygen writes, so no byte of a ``.sig`` file goes unchecked."""
    lines = armored.split(b"\n")
    if len(lines) < 4 or lines[0] != _ARMOR_BEGIN or lines[-2] != _ARMOR_END or lines[-1] != b"":
        raise ValueError("not an SSH signature")
    blob = base64.b64decode(b"".join(lines[1:-2]), validate=True)
    if armor(blob) != armored:
        raise ValueError("not an SSH signature as ssh-keygen writes it")
    return blob


def armor(blob: bytes) -> bytes:
    """ssh-keygen's armor of an SSHSIG blob (base64 in lines of 70)."""
    text = base64.b64encode(blob)
    body = b"\n".join(text[i:i + 70] for i in range(0, len(text), 70))
    return _ARMOR_BEGIN + b"\n" + body + b"\n" + _ARMOR_END + b"\n"


def b64decode_exact(text: str) -> bytes:
    """base64 that is the one encoding of its bytes (no spare bits or padding set another way)."""
    data = base64.b64decode(text, validate=True)
    if base64.b64encode(data).decode() != text:
        raise ValueError("not canonical base64")
    return data


# --- ssh-keygen ----------------------------------------------------------------------------------


def _keygen() -> str:
    from monte.ledger.signing import ssh_keygen

    return ssh_keygen()


def sign_bytes(key: Path, data: bytes) -> bytes:
    """An SSH signature (armored SSHSIG) of ``data`` under :data:`NAMESPACE` by the private ``key``."""
    from monte.ledger.signing import ssh_sign

    return ssh_sign(key, data, NAMESPACE)


def public_key_line(key: Path) -> str:
    """The public half of ``key`` (``ssh-keygen -y``), as one ``TYPE BASE64`` line."""
    r = subprocess.run([_keygen(), "-y", "-f", str(key)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise error("E_USAGE", f"{key} is not a readable SSH private key: {r.stderr.strip()[-300:]}",
                    "pass --key an SSH private key (ssh-keygen -t ed25519 -f KEY makes one)")
    return " ".join(r.stdout.split()[:2])


def fingerprint(public_key: str) -> str:
    """``SHA256:...`` of an SSH public key line, as ``ssh-keygen -l`` prints it."""
    kind, blob = public_key.split()[:2]
    digest = hashlib.sha256(base64.b64decode(blob)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def signers_of(allowed: Path, sig: bytes, data: bytes) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="monte-verify-") as tmp:
        s = Path(tmp) / "sig"
        s.write_bytes(sig)
        r = subprocess.run([_keygen(), "-Y", "find-principals", "-s", str(s), "-f", str(allowed)],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            return []
        found = [p for p in r.stdout.split() if p]
        return [p for p in found if _verified(allowed, p, s, data)]


def _verified(allowed: Path, principal: str, sig: Path, data: bytes) -> bool:
    r = subprocess.run([_keygen(), "-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE,
                        "-s", str(sig)], input=data, capture_output=True)
    return r.returncode == 0


def allowed_keys(allowed: Path, principal: str) -> list[str]:
    """The public keys ``allowed_signers`` lists for ``principal``."""
    out = []
    for line in allowed.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if principal in parts[0].split(","):
            for i in range(1, len(parts) - 1):  # options may stand between the principals and the key
                if parts[i].startswith(("ssh-", "ecdsa-", "sk-")):
                    out.append(f"{parts[i]} {parts[i + 1]}")
                    break
    return out
