"""Certificates for raftsched's gRPC TLS: throwaway CAs, node and client certificates, and the
checks a node runs on the PEM files it is given. The only module that imports ``cryptography``.

Keys are ECDSA P-256 (small, fast handshakes, accepted by gRPC's BoringSSL). Nothing here
reads the clock: the caller passes ``now`` (a UTC :class:`datetime`). Nothing here logs, and no
error message carries key material: problems name the file and what is wrong with it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CertificateAuthority",
    "DemoPki",
    "KeyPair",
    "certificate_summary",
    "check_ca",
    "check_key_pair",
    "names_host",
    "new_ca",
    "write_demo_pki",
]

_BACKDATE: Final = dt.timedelta(hours=1)  # tolerate a little clock skew between hosts
DEFAULT_HOSTS: Final = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM private key (PKCS#8, unencrypted); ``key_pem`` stays out of repr."""

    cert_pem: bytes
    key_pem: bytes = field(repr=False)

    def write(self, cert_path: Path, key_path: Path) -> None:
        """Write both files; the key file is created readable by its owner only (0600)."""
        cert_path.write_bytes(self.cert_pem)
        _write_private(key_path, self.key_pem)


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A CA that issues leaf certificates (see :func:`new_ca`)."""

    pair: KeyPair

    @property
    def cert_pem(self) -> bytes:
        return self.pair.cert_pem

    def issue(
        self,
        common_name: str,
        hosts: Sequence[str] = (),
        *,
        now: dt.datetime,
        days: int = 365,
        server: bool = True,
        client: bool = True,
    ) -> KeyPair:
        """A leaf certificate for ``common_name``, valid from ``now`` (less an hour) for ``days``.

        ``hosts`` become subject alternative names (IP literals as IP addresses, anything else
        as DNS names); gRPC checks the dialled host against them. ``server``/``client`` set the
        extended key usages (a node needs both: it serves and dials its peers).
        """
        ca_cert = x509.load_pem_x509_certificate(self.pair.cert_pem)
        ca_key = serialization.load_pem_private_key(self.pair.key_pem, password=None)
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key is not an EC key")
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            _base(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]),
                ca_cert.subject,
                key,
                now,
                days,
            )
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=True,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
        )
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(h) for h in dict.fromkeys(hosts)]), critical=False
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def new_ca(common_name: str, *, now: dt.datetime, days: int = 3650) -> CertificateAuthority:
    """A fresh self-signed CA (ECDSA P-256), valid from ``now`` (less an hour) for ``days``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _base(name, name, key, now, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)))


@dataclass(frozen=True, slots=True)
class DemoPki:
    """The files :func:`write_demo_pki` wrote (absolute paths)."""

    directory: Path
    ca_file: Path
    node_cert: Path
    node_key: Path
    client_cert: Path
    client_key: Path


def write_demo_pki(directory: Path, hosts: Sequence[str], *, now: dt.datetime) -> DemoPki:
    """A local CA and one node and one client certificate under ``directory``, for ``raftsched demo``.

    Files that are all present and still valid at ``now`` are kept (a demo restarted keeps its
    certificates); otherwise all are written anew. The CA's private key is not kept: nothing
    else can be issued from this CA afterwards. Key files are 0600.
    """
    directory = directory.absolute()
    pki = DemoPki(
        directory,
        directory / "ca.pem",
        directory / "node.pem",
        directory / "node.key",
        directory / "client.pem",
        directory / "client.key",
    )
    if _still_valid(pki, now):
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    ca = new_ca("raftsched demo CA", now=now)
    ca.issue("raftsched-node", [*DEFAULT_HOSTS, *hosts], now=now).write(pki.node_cert, pki.node_key)
    ca.issue("raftsched-client", now=now, server=False).write(pki.client_cert, pki.client_key)
    pki.ca_file.write_bytes(ca.cert_pem)
    return pki


def check_key_pair(cert_pem: bytes, key_pem: bytes) -> str:
    """Check that ``cert_pem`` is a PEM certificate chain and ``key_pem`` the private key of its
    first certificate; return a summary of that certificate (:func:`certificate_summary`).

    Raises ValueError saying what is wrong (never quoting the key).
    """
    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
    except ValueError:
        raise ValueError("not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise ValueError("the private key is encrypted (give an unencrypted PEM key)") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError("not a PEM private key") from None
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != certs[0].public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ):
        raise ValueError("the private key does not belong to the certificate")
    return _summary(certs[0])


def check_ca(ca_pem: bytes) -> str:
    """Check that ``ca_pem`` holds PEM certificates; return a summary of the first. Raises ValueError."""
    try:
        certs = x509.load_pem_x509_certificates(ca_pem)
    except ValueError:
        raise ValueError("not a PEM certificate") from None
    return _summary(certs[0])


def names_host(cert_pem: bytes, host: str) -> bool:
    """Whether the first certificate in ``cert_pem`` lists ``host`` (an IP literal or a DNS
    name; ``*.example.com`` covers one label) among its subject alternative names, as a TLS
    client checks it."""
    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        wanted = host.lower().rstrip(".")
        for name in san.get_values_for_type(x509.DNSName):
            pattern = name.lower().rstrip(".")
            if pattern == wanted:
                return True
            if pattern.startswith("*.") and "." in wanted and wanted.split(".", 1)[1] == pattern[2:]:
                return True
        return False
    return ip in san.get_values_for_type(x509.IPAddress)


def certificate_summary(cert_pem: bytes) -> str:
    """``subject, serial, expiry`` of the first certificate in ``cert_pem``, for logs."""
    return _summary(x509.load_pem_x509_certificates(cert_pem)[0])


def _summary(cert: x509.Certificate) -> str:
    expires = cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{cert.subject.rfc4514_string()}, serial {cert.serial_number:x}, expires {expires}"


def _still_valid(pki: DemoPki, now: dt.datetime) -> bool:
    files = (pki.ca_file, pki.node_cert, pki.node_key, pki.client_cert, pki.client_key)
    if not all(f.is_file() for f in files):
        return False
    try:
        check_key_pair(pki.node_cert.read_bytes(), pki.node_key.read_bytes())
        check_key_pair(pki.client_cert.read_bytes(), pki.client_key.read_bytes())
        certs = [x509.load_pem_x509_certificates(f.read_bytes())[0] for f in (pki.ca_file, pki.node_cert)]
    except (OSError, ValueError):
        return False
    margin = dt.timedelta(days=1)
    return all(c.not_valid_after_utc > now + margin for c in certs)


def _base(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, now: dt.datetime, days: int
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write_private(path: Path, data: bytes) -> None:
    """Create (or replace) ``path`` with mode 0600 from the start: no window where it is readable."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
