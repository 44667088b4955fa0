"""TLS for raftsched's gRPC: the node's server credentials (re-read on SIGHUP), the channel
credentials of every client (SDK, CLI, executors, nodes dialling nodes), and the diagnosis that
turns a failed handshake into a message saying what to fix.

Costs: credentials are built once per client (or per reload on the server); a call pays only
gRPC's own TLS record encryption. The handshake diagnosis runs only after a call has already
failed, never on a successful path.

No message or log line here carries key material: problems name the file and what is wrong.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import grpc

from raftsched.config.values import parse_address
from raftsched.errors import ConfigError, InvalidSpec
from raftsched.security import certs

if TYPE_CHECKING:  # only named in annotations: the executor loads no cluster config types
    from raftsched.config.types import ClusterConfig, TlsSettings

__all__ = [
    "TLS_CA_ENV",
    "TLS_CERT_ENV",
    "TLS_KEY_ENV",
    "HttpTls",
    "ServerTls",
    "TlsConfig",
    "aio_channel",
    "client_tls",
    "diagnose_handshake",
    "node_client_tls",
    "sync_channel",
]

TLS_CA_ENV: Final = "RAFTSCHED_TLS_CA"
TLS_CERT_ENV: Final = "RAFTSCHED_TLS_CERT"
TLS_KEY_ENV: Final = "RAFTSCHED_TLS_KEY"

_PROBE_TIMEOUT_S: Final = 1.0
_HINT_CA: Final = "pass --tls-ca (RAFTSCHED_TLS_CA; TlsConfig(ca_file=...) in the SDK)"
_HINT_CERT: Final = (
    "pass --tls-cert and --tls-key (RAFTSCHED_TLS_CERT/KEY; TlsConfig(cert_file=..., key_file=...))"
)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """How a client dials a node over TLS.

    ``ca_file``: PEM CA certificates the server's certificate must chain to (None: the system's
    trust store). ``cert_file``/``key_file``: this client's PEM certificate and key, for servers
    that require one (mutual TLS); both or neither. ``server_name``: the name checked against the
    server's certificate instead of the dialled host (for a certificate that does not list the
    address being dialled). Raises :class:`InvalidSpec` for a certificate without its key or the
    reverse.
    """

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        for name in ("ca_file", "cert_file", "key_file"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))
        if (self.cert_file is None) != (self.key_file is None):
            missing, given = ("key_file", "cert_file") if self.key_file is None else ("cert_file", "key_file")
            raise InvalidSpec(
                f"tls.{missing}", f"required with tls.{given} (a client certificate needs its key)"
            )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """Read the files and build gRPC channel credentials. Raises InvalidSpec naming a file
        that cannot be read or does not hold what it should."""
        ca = _read("tls.ca_file", self.ca_file) if self.ca_file is not None else None
        if ca is not None:
            _checked("tls.ca_file", self.ca_file, lambda: certs.check_ca(ca))
        cert = key = None
        if self.cert_file is not None and self.key_file is not None:
            cert = _read("tls.cert_file", self.cert_file)
            key = _read("tls.key_file", self.key_file)
            _checked("tls.cert_file", self.cert_file, lambda: certs.check_key_pair(cert, key))
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    def channel_options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def client_tls(
    ca: str | None = None,
    cert: str | None = None,
    key: str | None = None,
    *,
    config: ClusterConfig | None = None,
    environ: Mapping[str, str] | None = None,
) -> TlsConfig | None:
    """The TLS a program dials with: each of CA, certificate and key from the option given, else
    ``$RAFTSCHED_TLS_CA/CERT/KEY``, else the cluster config's ``[tls]`` (its CA, and the node
    certificate as the client certificate: :func:`node_client_tls`). None (plaintext) when none
    of them names anything. Raises InvalidSpec for a certificate without its key or the reverse.
    """
    env = os.environ if environ is None else environ
    base = node_client_tls(config) if config is not None else None
    ca = ca or env.get(TLS_CA_ENV) or None
    cert = cert or env.get(TLS_CERT_ENV) or None
    key = key or env.get(TLS_KEY_ENV) or None
    if base is None and ca is None and cert is None and key is None:
        return None
    if cert is not None or key is not None:
        cert_file, key_file = _path(cert), _path(key)
    else:
        cert_file, key_file = (base.cert_file, base.key_file) if base is not None else (None, None)
    ca_file = _path(ca) if ca is not None else (base.ca_file if base is not None else None)
    return TlsConfig(ca_file=ca_file, cert_file=cert_file, key_file=key_file)


def node_client_tls(config: ClusterConfig) -> TlsConfig | None:
    """How a holder of ``config`` dials the nodes: None without ``[tls]``; otherwise trusting
    ``tls.ca_file`` and presenting the node certificate (nodes dial each other with it)."""
    tls = config.tls
    if tls is None:
        return None
    return TlsConfig(ca_file=tls.ca_file, cert_file=tls.cert_file, key_file=tls.key_file)


def sync_channel(
    target: str,
    tls: TlsConfig | None,
    options: Sequence[tuple[str, Any]] = (),
    credentials: grpc.ChannelCredentials | None = None,
) -> grpc.Channel:
    """A blocking-API channel to ``target``: TLS if ``tls`` is given (``credentials`` may pass
    ones already built from it), else plaintext."""
    if tls is None:
        return grpc.insecure_channel(target, options=list(options))
    creds = credentials or tls.channel_credentials()
    return grpc.secure_channel(target, creds, options=[*options, *tls.channel_options()])


def aio_channel(
    target: str,
    tls: TlsConfig | None,
    options: Sequence[tuple[str, Any]] = (),
    credentials: grpc.ChannelCredentials | None = None,
    interceptors: Sequence[Any] = (),
) -> grpc.aio.Channel:
    """The asyncio twin of :func:`sync_channel` (call inside the running loop); ``interceptors``
    are client interceptors for every call (the bearer token's)."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=list(options), interceptors=list(interceptors))
    creds = credentials or tls.channel_credentials()
    return grpc.aio.secure_channel(
        target, creds, options=[*options, *tls.channel_options()], interceptors=list(interceptors)
    )


class ServerTls:
    """A node's TLS server credentials, from ``[tls]``; :meth:`reload` swaps in the files'
    current contents for every handshake after it, without a restart.

    gRPC asks :meth:`_fetch` at each new handshake whether the certificates changed; the answer
    is prepared by :meth:`reload` (files read and checked there, not per handshake). Open
    connections keep the certificate they were made with. ``require_client_cert`` is fixed when
    the server starts; a reload may change the CA, not whether a client certificate is required.
    """

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._pending: grpc.ServerCertificateConfiguration | None = None
        self._cert_pem = b""
        self._initial, self.summary = self._load()

    def names_host(self, host: str) -> bool:
        """Whether the certificate in use at start lists ``host`` (see :func:`certs.names_host`)."""
        return certs.names_host(self._cert_pem, host)

    def credentials(self) -> grpc.ServerCredentials:
        """The credentials for ``server.add_secure_port``. Use once (one server)."""
        return grpc.dynamic_ssl_server_credentials(
            self._initial, self._fetch, require_client_authentication=self.settings.require_client_cert
        )

    def reload(self) -> str:
        """Re-read the certificate, key and CA files; new handshakes use them from now on.

        Returns a summary of the new certificate (subject, serial, expiry). Raises
        :class:`ConfigError` naming the file at fault; the certificates in use stay in use.
        """
        configuration, summary = self._load()
        with self._lock:
            self._pending = configuration
            self.summary = summary
        return summary

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        # Runs on a gRPC core thread at every handshake: no IO, just hand over what reload read.
        with self._lock:
            configuration, self._pending = self._pending, None
        return configuration

    def _load(self) -> tuple[grpc.ServerCertificateConfiguration, str]:
        cert, key, ca, summary = _read_server_files(self.settings)
        self._cert_pem = cert
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca), summary


def _read_server_files(s: TlsSettings) -> tuple[bytes, bytes, bytes | None, str]:
    """``(cert, key, ca or None, the certificate's summary)`` read from the ``[tls]`` files and
    checked (the key matches the certificate, the CA parses). Raises :class:`ConfigError`
    listing every file at fault."""
    problems: list[str] = []
    cert = _read_config_file("tls.cert_file", s.cert_file, problems)
    key = _read_config_file("tls.key_file", s.key_file, problems)
    ca = _read_config_file("tls.ca_file", s.ca_file, problems) if s.ca_file is not None else None
    summary = ""
    if cert is not None and key is not None:
        try:
            summary = certs.check_key_pair(cert, key)
        except ValueError as bad:
            problems.append(f"tls.cert_file: {s.cert_file} with tls.key_file {s.key_file}: {bad}")
    if ca is not None:
        try:
            certs.check_ca(ca)
        except ValueError as bad:
            problems.append(f"tls.ca_file: {s.ca_file}: {bad}")
    if problems or cert is None or key is None:
        raise ConfigError("[tls]", problems)
    return cert, key, ca, summary


class HttpTls:
    """The TLS of a node's HTTP listener (``tls.http``): the node's certificate and key, and, with
    ``ca_file``, client certificates requested (optional) and checked against it, so
    ``/metrics`` can demand one (``tls.http_metrics_client_cert``) while browsers and API
    clients without one still connect.

    :meth:`reload` (SIGHUP, with the gRPC port's) loads the files into the same context: new
    handshakes present the new certificate, open connections keep theirs. CA certificates added
    to ``ca_file`` are trusted from then on; a CA removed from it stays trusted until a restart
    (OpenSSL cannot drop a loaded CA from a live context).
    """

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.summary = self.reload()

    def reload(self) -> str:
        """Re-read the files into the context; returns the certificate's summary. Raises
        :class:`ConfigError` naming the file at fault (the context is unchanged then)."""
        s = self.settings
        _cert, _key, ca, summary = _read_server_files(s)
        try:
            self.context.load_cert_chain(s.cert_file, s.key_file)
            if ca is not None:
                self.context.load_verify_locations(cadata=ca.decode("ascii", "replace"))
                self.context.verify_mode = ssl.CERT_OPTIONAL
        except (OSError, ssl.SSLError, ValueError) as bad:
            raise ConfigError("[tls]", [f"tls: the HTTP listener cannot use the files: {bad}"]) from None
        return summary


# ----------------------------------------------------------------------------------------------
# Diagnosis of failed handshakes
# ----------------------------------------------------------------------------------------------

_CLOSED: Final = ("Socket closed", "Connection reset", "Broken pipe", "connection closed")
_CLIENT_CERT_REFUSED: Final = (
    "CERTIFICATE_REQUIRED",
    "ALERT_UNKNOWN_CA",
    "ALERT_BAD_CERTIFICATE",
    "ALERT_CERTIFICATE_UNKNOWN",
    "ALERT_HANDSHAKE_FAILURE",
)


def diagnose_handshake(
    details: str, target: str, tls: TlsConfig | None, probe: Callable[[str], bool | None] | None = None
) -> str | None:
    """If a call to ``target`` failed (UNAVAILABLE, with gRPC's ``details``) because of TLS, a
    message saying so and what to pass; None if the failure looks like anything else (a node
    down, a network problem), which the caller retries as usual.

    A closed connection alone is ambiguous (a node going down closes it too), so for it the
    server is probed once (``probe``, default :func:`speaks_tls`: a TCP connection and an
    unverified TLS handshake, nothing sent) to tell "requires TLS" from "went away".
    """
    head = f"TLS handshake failed with {target}: "
    check = probe or speaks_tls
    if tls is None:
        if _any_in(details, _CLOSED) and check(target):
            return head + f"the server requires TLS; {_HINT_CA}"
        return None
    if "WRONG_VERSION_NUMBER" in details:
        return head + (
            "the server does not use TLS (a plaintext port); dial it without --tls-ca/--tls-cert/"
            "--tls-key (and RAFTSCHED_TLS_*), or configure [tls] on the node"
        )
    if "CERTIFICATE_VERIFY_FAILED" in details:
        why = _after(details, "CERTIFICATE_VERIFY_FAILED:") or "not signed by a trusted CA"
        trusted = f"the CA in {tls.ca_file}" if tls.ca_file is not None else "the system's trust store"
        return head + (
            f"the server's certificate is not trusted by {trusted} ({why}); {_HINT_CA} with the CA that "
            "signed the node certificates"
        )
    if "Peer name" in details or "not in peer certificate" in details:
        host = _host(target)
        return head + (
            f"the server's certificate does not name {host}; dial a name the certificate lists, or "
            "set TlsConfig(server_name=...)"
        )
    if _any_in(details, _CLIENT_CERT_REFUSED):
        return head + _client_cert_problem(tls)
    if _any_in(details, _CLOSED) and check(target):
        return head + _client_cert_problem(tls)
    return None


def _client_cert_problem(tls: TlsConfig) -> str:
    if tls.cert_file is None:
        return f"the server requires a client certificate (mutual TLS); {_HINT_CERT}"
    return (
        f"the server refused the client certificate {tls.cert_file} (it requires one signed by "
        "the CA in its tls.ca_file)"
    )


def speaks_tls(target: str, timeout: float = _PROBE_TIMEOUT_S) -> bool | None:
    """Whether the server at ``target`` completes (or answers within) a TLS handshake: True,
    False if it answers something else, None if it cannot be reached. Diagnosis only: the
    certificate is not checked and nothing is sent after the handshake."""
    try:
        host, port = parse_address(target, "target")
        sock = socket.create_connection((host, port), timeout=timeout)
    except (InvalidSpec, OSError):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # we only ask whether the peer speaks TLS at all
    with sock:
        try:
            context.wrap_socket(sock).close()
        except ssl.SSLError as exc:
            # An alert from the server (e.g. "certificate required" under TLS 1.2) is TLS too.
            return "ALERT" in str(exc).upper()
        except OSError:
            return None
    return True


def _any_in(text: str, needles: Sequence[str]) -> bool:
    return any(n in text for n in needles)


def _after(text: str, marker: str) -> str:
    _, sep, rest = text.partition(marker)
    return rest.split(":")[0].strip() if sep else ""


def _host(target: str) -> str:
    try:
        return parse_address(target, "target")[0]
    except InvalidSpec:
        return target


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------


def _path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value else None


def _read(field: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidSpec(field, f"cannot read {path}: {exc.strerror or exc}") from None


def _checked(field: str, path: Path | None, check: Callable[[], str]) -> None:
    try:
        check()
    except ValueError as bad:
        raise InvalidSpec(field, f"{path}: {bad}") from None


def _read_config_file(key: str, path: Path, problems: list[str]) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as exc:
        problems.append(f"{key}: cannot read {path}: {exc.strerror or exc}")
        return None
