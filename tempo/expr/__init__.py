"""expr layer of tempo."""
