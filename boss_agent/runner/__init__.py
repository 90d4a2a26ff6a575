"""The task runner: one task end to end (app-server, steer, collaboration, approvals,
cancel, exec and CUA fallbacks, git facts after the turn). See ``runner.Runner``."""

from boss_agent.runner.runner import Runner

__all__ = ["Runner"]
