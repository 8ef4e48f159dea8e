"""What monte remembers of its refs' tips, so that a ref moved back by plain git is caught.

A ledger is append-only only if nobody can move its ref back: ``git update-ref REF OLD`` (or
``reset``, ``push -f``, ``update-ref -d`` and a fresh ``experiment init``) would forget the
records after OLD, a spent test read among them. So every ref update the store makes is
remembered where those commands do not reach:

``<git dir>/monte/tips.log`` holds one line ``<ref> <old> <new> <unix time>`` per successful
update (``O_APPEND``, one ``write`` per line, no fsync; a torn line is skipped when read). Each
line is also a proof: monte only ever moves a ref forward, so ``old`` is an ancestor of ``new``.
``monte ledger verify`` adds a line of its own when it has walked from a remembered tip to the
current one (a ref git moved forward, by ``git fetch`` say). The store's check before an append
reads the log's tail backwards to the ref's last line: in the common case the last line of all,
one small read (no per-ref file is kept: replacing a file on each append costs ext4 ~0.4 ms).

git's own reflogs of ``refs/heads/monte/*`` (``git update-ref``, ``git fetch`` write them) are
remembered tips too. monte adds a line there for each of its own moves (message ``monte: ...``,
so ``git reflog show monte/<exp>/ledger`` shows them); those are not read back, ``tips.log``
has them.

A remembered tip that is no longer an ancestor of (or equal to) its ref's tip, or whose ref is
gone, is a rewind: the store refuses to append to such a ref and verify reports rule
``rewound``. Deleting ``tips.log`` and git's reflogs, as well as moving the ref, forgets the
records locally; a copy elsewhere (a shared remote with monte's ``pre-receive``, the results
bucket's mirror) still holds them.

Nothing here knows monte's rules; it reads commit parents and nothing else.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dulwich.object_store import BaseObjectStore
from dulwich.objects import Commit, ObjectID

from monte.errors import MonteError, error
from monte.ledger.refs import PREFIX, ZERO
from monte.ledger.views import OWN_DIR

LOG = f"{OWN_DIR}/tips.log"
_TAIL = 8192
#: The message prefix of the git reflog lines monte writes (skipped when reading reflogs).
REFLOG_MESSAGE = "monte: "
_MINE = REFLOG_MESSAGE.encode()
_HEX = frozenset(b"0123456789abcdef")


def _sha(token: bytes) -> ObjectID | None:
    return ObjectID(token) if len(token) == 40 and not set(token) - _HEX else None


#: a whole ``tips.log`` line as :func:`_parse` takes it (4 fields split on single spaces, ids of 40
#: lowercase hex digits, a time of ASCII digits): the log read in one pass, not line by line
_LINE = re.compile(rb"^([^ \n]*) ([0-9a-f]{40}) ([0-9a-f]{40}) ([0-9]+)$", re.MULTILINE)


def _parse(line: bytes) -> tuple[str, ObjectID | None, ObjectID, int] | None:
    """One ``tips.log`` line, or None for a torn one (a writer killed mid-write) or a stranger."""
    parts = line.split(b" ")
    if len(parts) != 4 or not parts[3].isdigit():
        return None
    old, new = _sha(parts[1]), _sha(parts[2])
    if old is None or new is None or new == ZERO:
        return None
    return parts[0].decode(errors="replace"), (None if old == ZERO else old), new, int(parts[3])


@dataclass(frozen=True)
class Remembered:
    """A tip of ``ref`` that monte remembers: when, and from where (``tips.log`` or git's reflog)."""

    ref: str
    sha: ObjectID
    when: int
    source: str


class Tips:
    """The tips remembered in one git directory (the common dir: refs and reflogs live there)."""

    def __init__(self, git_dir: str | os.PathLike[str]) -> None:
        self.git_dir = Path(git_dir)
        self.log = self.git_dir / LOG
        self._parsed: tuple[tuple[int, int], list[tuple[str, ObjectID | None, ObjectID, int]]] | None = None
        self._grouped: tuple[object, dict[str, list[tuple[str, ObjectID | None, ObjectID, int]]]] | None = None

    def check(self) -> None:
        """Refuse (``E_STORAGE``) when the memory cannot be kept or read: ``<git dir>/monte`` is
        not a folder, or ``tips.log`` is not a file. Appends then stop remembering tips, and a
        ref moved back by plain git would go unnoticed, so the store checks before it writes."""
        problem = self._problem()
        if problem is not None:
            raise problem

    def _problem(self) -> MonteError | None:
        folder = self.log.parent
        if os.path.lexists(folder) and not folder.is_dir():
            what, path = "is a file, not a folder", folder
        elif os.path.lexists(self.log) and not self.log.is_file():
            what, path = "is not a regular file", self.log
        else:
            return None
        return error("E_STORAGE", f"{path} {what}: monte remembers every tip of its refs in {self.log} (so that a "
                     "ledger moved back by plain git is caught), and cannot keep or read that memory; nothing "
                     "was written", f"move {path} aside (`mv {path} {path}.moved`) and run the command again")

    # --- writing (the store, after a successful compare-and-swap) -------------------------------

    def record(self, ref: str, old: ObjectID | None, new: ObjectID, *, when: int | None = None) -> None:
        """Remember that ``ref`` moved from ``old`` (None: created) to ``new``, a descendant."""
        line = b"%s %s %s %d\n" % (ref.encode(), old or ZERO, new, int(time.time()) if when is None else when)
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def reflog(self, ref: str, line: bytes) -> None:
        """Append ``line`` (git's reflog format) to git's reflog of ``ref``, so that
        ``git reflog show`` lists monte's moves too (its ``monte: `` lines are not read back)."""
        path = self.git_dir / "logs" / ref
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line + b"\n")
        finally:
            os.close(fd)

    # --- reading ---------------------------------------------------------------------------------

    def newest(self, ref: str) -> ObjectID | None:
        """The newest tip logged for ``ref``: the log read backwards from its end, a few KiB at a
        time, to the ref's last line (one read when ``ref`` was the last ref moved). Two writers
        may log out of order; the older tip is still an ancestor of the ref, so a check costs a
        short walk, never a false refusal."""
        try:
            fd = os.open(self.log, os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            self.check()  # .git/monte made a file: say so, not "nothing remembered"
            return None
        needle = ref.encode() + b" "
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self.check()
            end = st.st_size
            carry = b""
            size = _TAIL
            while end > 0:
                start = max(0, end - size)
                lines = (os.pread(fd, end - start, start) + carry).split(b"\n")
                carry = lines.pop(0) if start > 0 else b""  # a line cut by the chunk: the next read ends it
                for line in reversed(lines):
                    if line.startswith(needle) and (found := _parse(line)) is not None:
                        return found[2]
                end, size = start, min(size * 4, 1 << 22)
            return None
        finally:
            os.close(fd)

    def _log_lines(self) -> list[tuple[str, ObjectID | None, ObjectID, int]]:
        """Every line of the log, parsed once per version of the file (a verify reads it per
        experiment: 10,000 lines parse in ~35 ms)."""
        try:
            st = os.stat(self.log)
            key = (st.st_size, st.st_mtime_ns)
            if self._parsed is not None and self._parsed[0] == key:
                return self._parsed[1]
            data = self.log.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            self.check()  # a folder where the log is, or a file where its folder is: E_STORAGE
            return []
        lines = [(m[1].decode(errors="replace"), None if m[2] == ZERO else ObjectID(m[2]), ObjectID(m[3]), int(m[4]))
                 for m in _LINE.finditer(data) if m[3] != ZERO]  # what _parse keeps of each line, at once
        self._parsed = ((len(data), st.st_mtime_ns), lines)
        return lines

    def _log_by_ref(self) -> dict[str, list[tuple[str, ObjectID | None, ObjectID, int]]]:
        """The log's lines per ref (refs in the order they first appear, each ref's lines in log
        order), grouped once per version of the file: a verify asks per ref and per prefix."""
        lines = self._log_lines()
        if self._grouped is None or self._grouped[0] is not lines:
            grouped: dict[str, list[tuple[str, ObjectID | None, ObjectID, int]]] = {}
            for line in lines:
                grouped.setdefault(line[0], []).append(line)
            self._grouped = (lines, grouped)
        return self._grouped[1]

    def _reflog_lines(self, prefix: str) -> Iterator[tuple[str, ObjectID | None, ObjectID | None, int]]:
        """git's reflogs under ``logs/<prefix>``: (ref, old, new, time), monte's own lines skipped."""
        root = os.path.join(self.git_dir, "logs")
        top = os.path.join(root, prefix.rstrip("/"))
        if os.path.isfile(top):  # ``prefix`` is one ref
            paths = [top]
        else:  # plain strings, not Path objects: a ledger's 1,000 lineage refs each have a reflog
            paths = [os.path.join(d, name) for d, _, files in os.walk(top) for name in files]
        cut = len(root) + 1
        for path in paths:
            ref = path[cut:].replace(os.sep, "/")
            try:
                if not ref.startswith(prefix):
                    continue
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if data.count(b"\t" + _MINE) >= data.count(b"\n") + (not data.endswith(b"\n")):
                # every line monte's own (a ledger's every record): none to read, counted in C (a hand-edited
                # reflog could hide a line from this count, as it could delete it: tips.log is the memory)
                continue
            for line in data.split(b"\n"):
                head, _, message = line.partition(b"\t")
                parts = head.split(b" ")
                if message.startswith(_MINE) or len(parts) < 4:
                    continue
                old, new = _sha(parts[0]), _sha(parts[1])
                when = int(parts[-2]) if parts[-2].isdigit() else 0
                yield ref, None if old in (None, ZERO) else old, None if new in (None, ZERO) else new, when

    def heads(self, prefix: str = PREFIX) -> dict[str, list[Remembered]]:
        """Per ref under ``prefix``: the remembered tips that must still be in the ref's history.

        A tip that a ``tips.log`` line moved forward from (its ``old``) is an ancestor of that
        line's ``new``, so only the others need a walk: in an honest repository, one per ref
        (its newest)."""
        # (when, source) per remembered tip; a Remembered is made only for those kept
        tips: dict[str, dict[ObjectID, tuple[int, str]]] = {}
        proven: dict[str, set[ObjectID]] = {}
        for ref, entries in self._log_by_ref().items():
            if not ref.startswith(prefix):
                continue
            mine = tips.setdefault(ref, {})
            olds = proven.setdefault(ref, set())
            for _, old, new, when in entries:
                mine[new] = (when, "tips.log")
                if old is not None:
                    mine.setdefault(old, (when, "tips.log"))
                    olds.add(old)
        for ref, old_, new_, when in self._reflog_lines(prefix):
            mine = tips.setdefault(ref, {})
            for sha in (old_, new_):
                if sha is not None and sha not in mine:
                    mine[sha] = (when, "git reflog")
        out = {}
        for ref, mine in tips.items():
            olds = proven.get(ref, set())
            keep = [Remembered(ref, sha, when, source) for sha, (when, source) in mine.items() if sha not in olds]
            if keep:
                out[ref] = sorted(keep, key=lambda r: r.when)
        return out

    def by_monte(self, ref: str) -> set[ObjectID]:
        """Every tip of ``ref`` that ``tips.log`` names (monte wrote it, or verify saw it)."""
        out: set[ObjectID] = set()
        for _, old, new, _ in self._log_by_ref().get(ref, ()):
            out.add(new)
            if old is not None:
                out.add(old)
        return out


class Ancestry:
    """The ancestors of one commit (over all parents), walked lazily: a query walks only until
    it meets the commit asked about, and later queries continue the same walk."""

    def __init__(self, objects: BaseObjectStore, tip: ObjectID) -> None:
        self.objects = objects
        self.tip = tip
        self.seen: set[ObjectID] = {tip}
        self._todo: deque[ObjectID] = deque([tip])

    def __contains__(self, sha: object) -> bool:
        while sha not in self.seen and self._todo:
            self._step()
        return sha in self.seen

    def all(self) -> set[ObjectID]:
        while self._todo:
            self._step()
        return self.seen

    def _step(self) -> None:
        try:
            c = self.objects[self._todo.popleft()]
        except KeyError:  # not here (a shallow or partial copy): nothing beyond it to walk
            return
        if isinstance(c, Commit):
            for p in c.parents:
                if p not in self.seen:
                    self.seen.add(p)
                    self._todo.append(p)


def rewind_what(ref: str, sha: ObjectID, *, deleted: bool = False) -> str:
    """What happened to a ref that lost a tip monte remembers."""
    what = (f"{ref} was deleted, but monte remembers its tip {sha.decode()[:12]}" if deleted else
            f"{ref} no longer holds {sha.decode()[:12]}, a tip monte remembers")
    thing = "ledger" if ref.endswith("/ledger") else "ref"
    return f"{what}: the {thing} was moved back by something other than monte (e.g. git update-ref, reset, push -f)"


def restore_fix(ref: str, sha: ObjectID) -> str:
    return f"restore it with `git update-ref {ref} {sha.decode()}`"
