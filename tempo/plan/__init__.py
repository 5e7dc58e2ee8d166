"""plan layer of tempo."""
