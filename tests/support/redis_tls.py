"""A real redis-server that speaks only TLS and knows only one ACL user.

Certificates come from ``trustme`` (a throw-away CA in the test's directory); the
plain port is closed (``--port 0``) and the ``default`` user is off, so a client
reaches it only as ``rediss://USER:PASSWORD@127.0.0.1:PORT`` trusting that CA.
Debian's redis-server (7.0) is built with TLS.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from pathlib import Path

import trustme

from tests.conftest import REDIS_START_TIMEOUT_S, free_port

USER = "boss_worker"
PASSWORD = "tls-acl-" + "Pw7" * 8  # long enough to look like a real secret in a leak check
POLL_S = 0.05  # between connection attempts while redis-server starts


class TlsRedis:
    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
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

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--tls-cert-file", str(self._cert), "--tls-key-file", str(self._key),
             "--tls-ca-cert-file", str(self.ca_file), "--tls-auth-clients", "no",
             "--dir", str(self.directory), "--save", "", "--appendonly", "no",
             "--user", USER, "on", f">{PASSWORD}", "~byai_gateway:*", "&*", "+@all",
             "--user", "default", "off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        context = ssl.create_default_context(cafile=str(self.ca_file))
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw, \
                        context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                    sock.sendall(f"AUTH {USER} {PASSWORD}\r\nPING\r\n".encode())
                    answer = b""
                    while b"+PONG" not in answer and (chunk := sock.recv(64)):
                        answer += chunk
                    if b"+PONG" in answer:
                        return
            except OSError:
                time.sleep(POLL_S)
        raise RuntimeError("the TLS redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
