"""The ledger: records (no I/O) < store (dulwich, refs, compare-and-swap)."""
