"""api layer of tempo."""
