"""Shared test support: fixtures' building blocks, fakes and harnesses that more than one test file,
or a test and a bench script, use.

The tests import it as ``support`` (pytest puts tests/ on the path): ``from support.ledger import
measurement``. The bench scripts, with only the repository's root on the path, import it as
``tests.support``: ``from tests.support import crashhelp``. So its modules import one another
relatively (``from .helpers import git``) and import nothing of the tests outside it.
"""
