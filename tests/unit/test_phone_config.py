"""The ``local.*`` keys: how phones reach the page, validated at load (exit 2, never at a retry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from boss_agent.config import load_config
from boss_agent.errors import ConfigError


def empty_config(tmp_path: Path) -> Path:
    (tmp_path / "config.toml").touch()
    return tmp_path / "config.toml"


def test_the_local_keys_load_from_the_environment(tmp_path: Path) -> None:
    config = load_config(empty_config(tmp_path), environ={
        "BOSS_LOCAL_LISTEN": "192.168.1.20:8443, [fd00::2]:8443",
        "BOSS_LOCAL_PUBLIC_ORIGINS": "https://Box.tail1234.ts.net",
        "BOSS_LOCAL_TLS_CERT": str(tmp_path / "c.pem"), "BOSS_LOCAL_TLS_KEY": str(tmp_path / "k.pem")})
    assert config.local.listen == ("192.168.1.20:8443", "[fd00::2]:8443")
    assert config.local.public_origins == ("https://box.tail1234.ts.net",)
    assert config.local.tls_cert == tmp_path / "c.pem"


@pytest.mark.parametrize("env", [
    {"BOSS_LOCAL_LISTEN": "http://192.168.1.20:8080"},  # plain http on the network
    {"BOSS_LOCAL_LISTEN": "127.0.0.1:8443"},
    {"BOSS_LOCAL_LISTEN": "my-box.local:8443"},
    {"BOSS_LOCAL_PUBLIC_ORIGINS": "http://box.tail1234.ts.net"},
    {"BOSS_LOCAL_PUBLIC_ORIGINS": "https://box.tail1234.ts.net/page"},
    {"BOSS_LOCAL_TLS_CERT": "/etc/cert.pem"},  # without its key
])
def test_a_bad_local_key_is_a_config_error(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="local"):
        load_config(empty_config(tmp_path), environ=env)
