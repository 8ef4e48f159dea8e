"""Bulk reads of a repository's objects through git itself, for ``monte ledger verify``.

Reading 10,000 records one object at a time through dulwich's packs (in Python, ~50 µs a read,
~100,000 tree reads to diff the records) is what made verify slow. Here each kind of read is one
``git`` process over the whole history: ``rev-list`` for the first-parent line,
``cat-file --batch`` for the raw commits and blobs (parsed by dulwich, so a commit reads as it
would through the object store), ``diff-tree --stdin`` for the files each record changes.

git runs on the repository the store opened (``--git-dir``), with the environment it was given:
inside a hook that is the push's quarantine (``GIT_OBJECT_DIRECTORY``,
``GIT_ALTERNATE_OBJECT_DIRECTORIES``), so git sees the objects being pushed, as dulwich does.
``--no-replace-objects``: ``refs/replace/`` is not the record (dulwich does not read it either).
A git that cannot run, or fails, is ``E_INTEGRITY`` naming the command and what git said.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from dulwich.objects import Commit, ObjectID

from monte.errors import error
from monte.ledger.refs import ZERO

EMPTY_TREE = ObjectID(b"4b825dc642cb6eb9a060e54bf8d69288fbee4904")

#: (path, old blob or None, new blob or None) for each file that differs between two trees
Change = tuple[str, ObjectID | None, ObjectID | None]


class Git:
    """git over the repository at ``git_dir`` (a ``.git`` folder or a bare repository)."""

    def __init__(self, git_dir: str | os.PathLike[str]) -> None:
        self.git_dir = os.fspath(git_dir)

    def run(self, args: Sequence[str], data: bytes = b"") -> bytes:
        cmd = ["git", "--no-replace-objects", f"--git-dir={self.git_dir}", *args]
        try:
            p = subprocess.run(cmd, input=data, capture_output=True, check=False)
        except OSError as e:
            raise error("E_INTEGRITY", f"could not run `git {args[0]}` to read the ledger's history: {e}",
                        "install git (monte needs it on PATH), then verify again") from None
        if p.returncode != 0:
            said = p.stderr.decode(errors="replace").strip().splitlines()
            raise error("E_INTEGRITY", f"`git {args[0]}` failed reading {self.git_dir} (exit {p.returncode}): "
                        f"{said[-1] if said else 'no message'}",
                        "check the repository with `git fsck`; restore missing objects from a good copy "
                        "(a clone, the remote), then verify again")
        return p.stdout

    def first_parents(self, tip: ObjectID, since: ObjectID | None) -> list[ObjectID]:
        """The first-parent line from ``tip`` back to (not including) ``since``, newest first, as
        git lists it (the caller checks that each commit's first parent is the next)."""
        args = ["rev-list", "--first-parent", tip.decode()]
        if since is not None:
            args.append("^" + since.decode())
        return [ObjectID(line) for line in self.run(args).split()]

    def objects(self, shas: Sequence[bytes]) -> dict[bytes, tuple[bytes, bytes]]:
        """(type, raw bytes) of each object git has; a missing one is left out."""
        if not shas:
            return {}
        raw = self.run(["cat-file", "--batch"], b"\n".join(shas) + b"\n")
        out: dict[bytes, tuple[bytes, bytes]] = {}
        at, end = 0, len(raw)
        while at < end:
            nl = raw.index(b"\n", at)
            head = raw[at:nl].split()
            if len(head) != 3:  # "<sha> missing", "<name> ambiguous"
                at = nl + 1
                continue
            size = int(head[2])
            out[head[0]] = (head[1], raw[nl + 1:nl + 1 + size])
            at = nl + 1 + size + 1
        return out

    def commits(self, shas: Sequence[ObjectID]) -> dict[ObjectID, Commit]:
        """The commits among ``shas``, parsed by dulwich from their raw bytes."""
        out: dict[ObjectID, Commit] = {}
        for sha, (kind, raw) in self.objects(shas).items():
            if kind == b"commit":
                c = Commit.from_raw_string(Commit.type_num, raw, sha=ObjectID(sha))
                assert isinstance(c, Commit)
                out[ObjectID(sha)] = c
        return out

    def diffs(self, pairs: Sequence[tuple[ObjectID | None, ObjectID]]) -> list[list[Change]]:
        """For each (old tree, new tree) pair (None: the empty tree), the files that differ, in
        the order :meth:`monte.ledger.verify.Verifier._flat_changes` yields them (names sorted
        at each level, a folder's files before a file of the same name); a file whose id is
        unchanged (its mode alone changed) is not a change."""
        if not pairs:
            return []
        data = b"".join(b"%s %s\n" % (old or EMPTY_TREE, new) for old, new in pairs)
        raw = self.run(["diff-tree", "--stdin", "-r", "-z", "--no-abbrev", "--no-renames"], data)
        out: list[list[Change]] = []
        at, end = 0, len(raw)
        current: list[Change] = []
        while at < end:
            if raw[at:at + 1] == b":":
                meta_end = raw.index(b"\0", at)
                path_end = raw.index(b"\0", meta_end + 1)
                fields = raw[at + 1:meta_end].split()
                old, new = fields[2], fields[3]
                if old != new:
                    current.append((raw[meta_end + 1:path_end].decode(),
                                    None if old == ZERO else ObjectID(old), None if new == ZERO else ObjectID(new)))
                at = path_end + 1
            else:  # "<old> <new>\n": the next pair's output starts
                nl = raw.index(b"\n", at)
                current = []
                out.append(current)
                at = nl + 1
        if len(out) != len(pairs):
            raise error("E_INTEGRITY", f"`git diff-tree` answered {len(out)} of {len(pairs)} tree pairs reading "
                        f"{self.git_dir}", "check the repository with `git fsck`, then verify again")
        for changes in out:
            changes.sort(key=_order)
        return out


def _order(change: Change) -> list[tuple[bytes, int]]:
    parts = change[0].encode().split(b"/")
    return [(p, 0) for p in parts[:-1]] + [(parts[-1], 1)]
