"""Storage that outlives a machine: the model hub (and, later, the Vault and the bucket)."""
