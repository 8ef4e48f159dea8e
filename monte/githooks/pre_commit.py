"""The pre-commit framework's hook (``.pre-commit-hooks.yaml``, stage ``pre-push``): verify the monte
refs a push sends, and stay out of every other push.

pre-commit reads git's pre-push input itself and tells a hook about one ref of the push: the
first that sends anything (``PRE_COMMIT_REMOTE_BRANCH``, ``PRE_COMMIT_REMOTE_NAME``). When that
is a ``refs/heads/monte/`` ref, every local monte ref that differs from the remote's copy
(``refs/remotes/<remote>/monte/...``; all of them for a remote without tracking refs) is what a
``refs/heads/monte/*`` push sends, and they are judged together as monte's own pre-push hook
judges them (each new tip's whole history, and no remote ref moved back). Any other push exits
at once, importing nothing of the ledger. (A ``git push --all`` that also sends a branch which
sorts before ``monte/`` is told to pre-commit as that branch: monte's own hooks, ``monte hooks
install``, see every ref of a push.)

pre-commit installs this package without extras: the light install, no torch, DVC or Fabric.
"""

from __future__ import annotations

import os
import sys

PREFIX = "refs/heads/monte/"


def updates(remote: str) -> list[str]:
    """``old new ref`` for every local monte ref whose value the remote's copy does not have."""
    from monte.ledger.refs import ZERO
    from monte.ledger.store import Store
    from monte.workspace import find_repo_root

    store = Store(find_repo_root())
    theirs = {name.replace(f"refs/remotes/{remote}/", "refs/heads/", 1): sha
              for name, sha in store.refs_under(f"refs/remotes/{remote}/monte/").items()} if remote else {}
    out = []
    for ref, sha in sorted(store.refs_under(PREFIX).items()):
        old = theirs.get(ref)
        if old != sha:
            out.append(f"{(old or ZERO).decode()} {sha.decode()} {ref}")
    return out


def main() -> int:
    if not os.environ.get("PRE_COMMIT_REMOTE_BRANCH", "").startswith(PREFIX):
        return 0  # not a push of monte refs
    from monte.errors import MonteError
    from monte.githooks import refuse
    from monte.ledger.store import Store
    from monte.workspace import find_repo_root

    lines = updates(os.environ.get("PRE_COMMIT_REMOTE_NAME", ""))
    if not lines:
        return 0
    try:
        # never a workspace's store: a hook must not move refs (it lets in nothing from remotes)
        refuse(lines, Store.from_git_env() or Store(find_repo_root()), full=True, hook=os.environ.get("MONTE_HOOK"))
    except MonteError as e:
        print(f"{e.code}: {e.message}\n  fix: {e.fix}", file=sys.stderr)
        return int(e.exit_code)
    print(f"monte: {len(lines)} monte ref(s) to push keep every rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
