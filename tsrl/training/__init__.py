"""The training loop, checkpoints and run records."""
