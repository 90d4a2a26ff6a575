"""The Boss control plane task source (docs/device-api.md): HTTP client, spool, loops."""

from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.boss.source import BossSource

__all__ = ["BossApi", "BossSource", "BossApiRetry"]
