"""A real redis-server that speaks only TLS and knows only one ACL user.

Certificates come from ``trustme`` (a throw-away CA in the test's directory); the
plain port is closed (``--port 0``) and the ``default`` user is off, so a client
reaches it only as ``rediss://USER:PASSWORD@127.0.0.1:PORT`` trusting that CA.
Debian's redis-server (7.0) is built with TLS.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import trustme

from tests.support.redis_process import RedisProcess

USER = "boss_worker"
PASSWORD = "tls-acl-" + "Pw7" * 8  # long enough to look like a real secret in a leak check


class TlsRedis(RedisProcess):
    what = "the TLS redis-server"

    def __init__(self, binary: str, directory: Path) -> None:
        super().__init__(binary, directory)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        self.ca_file = directory / "redis-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        self._cert, self._key = directory / "redis-cert.pem", directory / "redis-key.pem"
        cert.cert_chain_pems[0].write_to_path(str(self._cert))
        cert.private_key_pem.write_to_path(str(self._key))

    @property
    def url(self) -> str:
        return f"rediss://{USER}:{PASSWORD}@127.0.0.1:{self.port}/0"

    @property
    def plain_url(self) -> str:
        return f"redis://{USER}:{PASSWORD}@127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        return ["--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
                "--tls-cert-file", str(self._cert), "--tls-key-file", str(self._key),
                "--tls-ca-cert-file", str(self.ca_file), "--tls-auth-clients", "no",
                "--dir", str(self.directory), "--save", "", "--appendonly", "no",
                "--user", USER, "on", f">{PASSWORD}", "~byai_gateway:*", "&*", "+@all",
                "--user", "default", "off"]

    def answers_ping(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(f"AUTH {USER} {PASSWORD}\r\nPING\r\n".encode())
            answer = b""
            while b"+PONG" not in answer and (chunk := sock.recv(64)):
                answer += chunk
            return b"+PONG" in answer
