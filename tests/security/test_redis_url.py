"""``gateway.redis_url``: whoever can XADD to the gateway's streams controls tasks, so a
Redis that is not this machine is reached over TLS (``rediss://``) or as an ACL user
with a password. ``gateway.allow_insecure_redis = true`` accepts a plain remote
``redis://``, with a warning at every start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from boss_agent.config import load_config
from boss_agent.daemon.runtime import Daemon
from boss_agent.errors import ConfigError
from boss_agent.netaddr import check_redis_url, redis_security
from tests.support.cli import isolated, run_cli

REMOTE_PLAIN = ["redis://redis.internal:6379/0", "redis://10.0.0.5:6379", "redis://:onlypass@10.0.0.5",
                "redis://alice@10.0.0.5/0", "REDIS://redis.internal", "redis://localhost.evil.com"]


@pytest.mark.parametrize("url", REMOTE_PLAIN)
def test_a_plain_remote_redis_url_is_refused_at_load(url: str) -> None:
    with pytest.raises(ConfigError, match="rediss://"):
        load_config(overrides={"gateway.redis_url": url}, environ={})


@pytest.mark.parametrize(("url", "mode"), [
    ("rediss://redis.internal:6380/0", "tls"),
    ("rediss://alice:pw@redis.internal:6380/0", "tls"),
    ("redis://alice:s3cret@redis.internal:6379/0", "acl"),
    ("redis://127.0.0.1:6379/0", "loopback"),
    ("redis://localhost", "loopback"),
    ("redis://[::1]:6379", "loopback"),
    ("unix:///run/redis/redis.sock", "loopback"),
])
def test_tls_an_acl_user_or_loopback_is_accepted(url: str, mode: str) -> None:
    config = load_config(overrides={"gateway.redis_url": url}, environ={})
    assert config.gateway.redis_url == url
    assert redis_security(url) == mode


def test_allow_insecure_redis_accepts_it_and_warns_at_every_check(caplog: pytest.LogCaptureFixture) -> None:
    config = load_config(environ={"BOSS_REDIS_URL": "redis://redis.internal:6379/0",
                                  "BOSS_GATEWAY_ALLOW_INSECURE_REDIS": "true"})
    assert config.gateway.allow_insecure_redis
    assert redis_security(config.gateway.redis_url) == "insecure"
    with caplog.at_level(logging.WARNING):
        check_redis_url(config.gateway.redis_url, True)
        check_redis_url(config.gateway.redis_url, True)
    assert len([r for r in caplog.records if "clear text" in r.getMessage()]) == 2


def test_the_refusal_is_one_line_and_never_shows_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides={"gateway.redis_url": "redis://:hunter2@10.0.0.5"}, environ={})
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)


def test_boss_agent_run_exits_2_with_one_line(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text('[gateway]\nenabled = true\nredis_url = "redis://redis.internal:6379/0"\n')
    result = run_cli("--config", str(config_file), "run", env=isolated(tmp_path))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "gateway.redis_url" in lines[0] and "allow_insecure_redis" in lines[0]


async def test_the_daemon_warns_at_its_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The daemon checks again when it starts (like the server URL): the warning is in
    every start's log, not only in the first one after the config was written."""
    config = load_config(overrides={"state_dir": str(tmp_path / "state"), "gateway.enabled": True,
                                    "gateway.redis_url": "redis://redis.internal:1/0",
                                    "gateway.allow_insecure_redis": True}, environ={})
    daemon = Daemon(config, handle_signals=False)
    daemon.shutdown.stopping.set()  # stop at once: only the start-up checks run
    with caplog.at_level(logging.WARNING, logger="boss_agent"):
        await daemon.run()
    assert any("clear text" in r.getMessage() and "redis.internal" in r.getMessage()
               for r in caplog.records)
