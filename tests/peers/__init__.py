"""Real peers on loopback: codex, redis-server, HTTP servers, Chromium, Xvfb, processes."""
