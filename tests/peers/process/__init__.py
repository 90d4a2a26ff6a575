"""Real processes: signals, sd_notify sockets, locks."""
