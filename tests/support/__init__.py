"""Shared test support: fixtures' building blocks, fakes and harnesses that more than one test file,
or a test and a bench script, use.

The tests are one package, ``tests``: the tests and the bench scripts alike import this as
``tests.support`` (``from tests.support.ledger import measurement``). Its modules import one another
relatively (``from .helpers import git``) and import nothing of the tests outside it.
"""
