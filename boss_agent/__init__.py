"""boss-agent: the daemon that turns a developer's machine into a device the Boss app drives."""

__version__ = "0.1.0"
