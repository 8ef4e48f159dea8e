"""Shared test support: fixtures' building blocks and fakes that more than one test file uses.

Import it as ``support`` (tests/ is on the path, as for ``helpers``): ``from support.ledger import
measurement``."""
