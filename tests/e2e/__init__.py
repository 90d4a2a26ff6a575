"""End to end: the daemon, the control plane and codex together, as a user runs them."""
