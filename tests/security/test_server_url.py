"""``server.url`` must be https unless it is loopback: the device token and every prompt
travel to it. ``server.allow_insecure_http = true`` overrides, with a warning at every start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from boss_agent.config import check_server_url, load_config
from boss_agent.daemon.runtime import Daemon
from boss_agent.errors import ConfigError
from boss_agent.identity import Identity, save_identity


@pytest.mark.parametrize("url", ["http://boss.example.com", "http://10.0.0.5:8765", "http://localhost.evil.com",
                                 "http://127.0.0.1.nip.io", "HTTP://boss.example.com/api"])
def test_a_remote_plain_http_server_url_is_refused(url):
    with pytest.raises(ConfigError, match="https"):
        load_config(overrides={"server.url": url}, environ={})


def test_the_environment_is_checked_too():
    with pytest.raises(ConfigError, match="https"):
        load_config(environ={"BOSS_SERVER_URL": "http://boss.example.com"})


@pytest.mark.parametrize("url", ["https://boss.example.com", "http://127.0.0.1:8765", "http://localhost:8765",
                                 "http://[::1]:8765", "http://127.0.0.2"])
def test_https_and_loopback_http_are_accepted(url):
    assert load_config(overrides={"server.url": url}, environ={}).server_url == url


def test_allow_insecure_http_overrides_and_warns_each_time(tmp_path: Path, caplog):
    config_file = tmp_path / "config.toml"
    config_file.write_text('[server]\nurl = "http://boss.example.com"\nallow_insecure_http = true\n')
    config = load_config(config_file, environ={})
    assert config.server_url == "http://boss.example.com" and config.allow_insecure_http
    with caplog.at_level(logging.WARNING):
        check_server_url(config.server_url, config.allow_insecure_http)
        check_server_url(config.server_url, config.allow_insecure_http)
    warnings = [r for r in caplog.records if "clear text" in r.getMessage()]
    assert len(warnings) == 2


async def test_the_daemon_refuses_a_stored_pairing_to_a_remote_http_server(tmp_path: Path):
    """The daemon talks to the URL stored at pairing, not to ``server.url``: it checks that one."""
    state = tmp_path / "state"
    save_identity(state, Identity("http://boss.example.com", "dev_1", "tok_secret_value"))
    config = load_config(overrides={"state_dir": str(state)}, environ={})
    with pytest.raises(ConfigError, match="https"):
        await Daemon(config).run()
