"""The certificate of the phone listeners (``local.listen``): the owner's, or one made once.

Without ``local.tls_cert``/``local.tls_key`` the control plane makes a self-signed
ECDSA P-256 certificate the first time a listener starts and keeps it beside its
database (``phone-tls.crt``, and ``phone-tls.key`` mode 0600), so its SHA-256
fingerprint stays the same across restarts: the pairing URL carries it
(``#…&fp=sha256:HEX``) for the phone to check, and ``phone pair``, ``doctor`` and the
page show it. A new one is made only when the old one has expired or is unreadable.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import logging
import os
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from boss_agent.errors import ConfigError

logger = logging.getLogger(__name__)

CERT_FILE = "phone-tls.crt"
KEY_FILE = "phone-tls.key"
CERT_DAYS = 825  # the longest validity Apple platforms accept for a TLS server certificate
COMMON_NAME = "boss-agent local control plane"


def default_paths(db_dir: Path) -> tuple[Path, Path]:
    return db_dir / CERT_FILE, db_dir / KEY_FILE


def fingerprint_of_der(der: bytes) -> str:
    return "sha256:" + hashlib.sha256(der).hexdigest()


def fingerprint(cert_path: Path) -> str:
    """``sha256:HEX`` of the (first) certificate in ``cert_path``."""
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    return fingerprint_of_der(cert.public_bytes(serialization.Encoding.DER))


def _still_valid(cert_path: Path, key_path: Path) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc > datetime.datetime.now(datetime.UTC)


def _make(cert_path: Path, key_path: Path, addresses: tuple[str, ...]) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, COMMON_NAME)])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName("localhost"), *(x509.IPAddress(ipaddress.ip_address(a)) for a in addresses)]
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    tmp = key_path.with_name(key_path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key_bytes)
    os.replace(tmp, key_path)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    logger.info("made a self-signed certificate for the phone listeners (%s)", fingerprint(cert_path))


def certificate(db_dir: Path, addresses: tuple[str, ...], cert: Path | None = None,
                key: Path | None = None) -> tuple[Path, Path]:
    """The owner's ``cert``/``key``, or the self-signed pair beside the database (made once)."""
    if (cert is None) != (key is None):
        raise ConfigError("local.tls_cert and local.tls_key go together: set both or neither")
    if cert is not None and key is not None:
        return cert, key
    cert_path, key_path = default_paths(db_dir)
    if not _still_valid(cert_path, key_path):
        _make(cert_path, key_path, addresses)
    return cert_path, key_path


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"local.tls_cert / local.tls_key: cannot load ({exc})") from exc
    return context
