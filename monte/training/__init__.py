"""Training chunks: recipes, TRL adapters, and the record a chunk leaves in the ledger."""
