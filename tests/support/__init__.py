"""What the test layers share: harnesses, waits, configs, raw codex, the browser."""
