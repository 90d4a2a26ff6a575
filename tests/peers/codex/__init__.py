"""The real codex binary (pinned npm package) against the scripted model."""
