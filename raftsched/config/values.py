"""One configuration value at a time: addresses, sizes, node ids, secrets and key paths.

Each check names the key path of the value it refuses. Leaf code (the executor, the client, the
listeners) parses an address or a size here without loading the cluster's value types.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Final

from raftsched.errors import InvalidSpec
from raftsched.workflow.located import type_name

MIN_SECRET_LENGTH: Final = 16
"""Shortest accepted ``cluster.secret``, in characters."""

_NODE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PORT: Final = re.compile(r"[0-9]+")
_HOST_LABEL: Final = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_DOTTED_NUMBERS: Final = re.compile(r"[0-9.]+")
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")

Number = int | float


DEFAULT_MAP_SIZE: Final = 64 << 30
"""The default LMDB map size (64 GiB): address space only, no disk until data fills it."""

MIN_MAP_SIZE: Final = 256 << 10
MAX_MAP_SIZE: Final = 1 << 50  # 1 PiB: beyond any disk, below what LMDB's page numbers allow

_SIZE: Final = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")
_SIZE_UNITS: Final[Mapping[str, int]] = {
    "": 1,
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def parse_size(value: object, field: str = "size") -> int:
    """A byte count from an integer or a string such as ``"64GiB"``, ``"512MiB"``, ``"1.5GB"``.

    Units (case-insensitive): ``B``, ``KiB``/``MiB``/``GiB``/``TiB`` (powers of 1024) and
    ``KB``/``MB``/``GB``/``TB`` (powers of 1000); no unit means bytes. The result must be a whole
    number of bytes. Raises :class:`InvalidSpec` (naming ``field``) for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidSpec(field, f"expected a size such as 512MiB or 64GiB, got {toml_type_name(value)}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidSpec(field, f"must not be negative, got {value}")
        return value
    m = _SIZE.fullmatch(value)
    unit = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidSpec(
            field, f"{shown!r} is not a size (a number and one of B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
        )
    number = m.group(1)
    whole, _, frac = number.partition(".")
    scale: int = 10 ** len(frac)
    size, rest = divmod((int(whole) * scale + int(frac or "0")) * unit, scale)
    if rest:
        raise InvalidSpec(field, f"{value!r} is not a whole number of bytes")
    return size


def parse_map_size(value: object, field: str = "map_size") -> int:
    """An LMDB map size: :func:`parse_size`, then 256 KiB to 1 PiB. Raises :class:`InvalidSpec`."""
    size = parse_size(value, field)
    problem = map_size_problem(size)
    if problem:
        raise InvalidSpec(field, problem)
    return size


def map_size_problem(size: int) -> str | None:
    if not MIN_MAP_SIZE <= size <= MAX_MAP_SIZE:
        return f"must be between 256KiB and 1PiB, got {size} bytes"
    return None


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` names this machine only: a loopback IP literal (127.0.0.0/8, ::1)
    or ``localhost`` (and names under ``.localhost``). Any other hostname counts as exposed:
    what it resolves to is not known here. An unparseable address is not loopback."""
    try:
        host, _ = parse_address(address, "")
    except InvalidSpec:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")


def parse_address(value: str, field: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:7001``) into ``(host, port)``.

    The host comes back without brackets; an IP literal is compressed, a hostname lower-cased.
    The port is 1-65535. Raises :class:`InvalidSpec` naming ``field`` if the value is malformed.
    """
    if not isinstance(value, str):
        raise InvalidSpec(field, f"expected a host:port string, got {toml_type_name(value)}")
    example = "e.g. 127.0.0.1:7001 or [::1]:7001"
    if not value:
        raise InvalidSpec(field, f"empty address; expected host:port, {example}")
    if value.startswith("["):
        host, sep, port_text = value[1:].partition("]:")
        if not sep:
            raise InvalidSpec(field, f"{value!r}: expected [ipv6-address]:port, {example}")
        try:
            ip = ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidSpec(field, f"{value!r}: {host!r} is not an IPv6 address") from None
        host = ip.compressed
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise InvalidSpec(field, f"{value!r}: missing port; expected host:port, {example}")
        if ":" in host:
            raise InvalidSpec(field, f"{value!r}: an IPv6 address needs brackets, e.g. [::1]:7001")
        host = _check_host(value, host, field)
    if not port_text:
        raise InvalidSpec(field, f"{value!r}: missing port; expected host:port, {example}")
    if not _PORT.fullmatch(port_text):
        raise InvalidSpec(field, f"{value!r}: port {port_text!r} is not a number")
    digits = port_text.lstrip("0") or "0"
    port = int(digits) if len(digits) <= 5 else 0  # int() of thousands of digits would raise
    if not 1 <= port <= 65535:
        raise InvalidSpec(field, f"port {digits} out of range (1-65535)")
    return host, port


def check_secret(path: str, value: object, problems: list[str]) -> str | None:
    secret = check_string(path, value, problems)
    if secret is not None and len(secret) < MIN_SECRET_LENGTH:
        problems.append(
            f"{path}: too short ({len(secret)} characters; at least {MIN_SECRET_LENGTH} required)"
        )
        return None
    return secret


def check_node_id(path: str, value: object, problems: list[str]) -> str | None:
    node_id = check_string(path, value, problems)
    if node_id is None:
        return None
    if not _NODE_ID.fullmatch(node_id):
        problems.append(f"{path}: invalid id {node_id!r} (1-64 characters from A-Z a-z 0-9 _ -)")
        return None
    return node_id


def check_peer_address(path: str, value: object, problems: list[str]) -> str | None:
    """Validate an address other nodes and clients dial; return its canonical form."""
    text = check_string(path, value, problems)
    if text is None:
        return None
    try:
        host, port = parse_address(text, path)
    except InvalidSpec as e:
        problems.append(str(e))
        return None
    canonical = _format_address(host, port)
    if _is_wildcard(host):
        problems.append(
            f"{path}: {canonical} is a wildcard address; give one that other nodes and clients can dial"
        )
        return None
    return canonical


def _check_host(value: str, host: str, field: str) -> str:
    if not host:
        raise InvalidSpec(field, f"{value!r}: missing host")
    if _DOTTED_NUMBERS.fullmatch(host):
        try:
            return ipaddress.IPv4Address(host).compressed
        except ValueError:
            raise InvalidSpec(field, f"{value!r}: {host!r} is not an IPv4 address") from None
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise InvalidSpec(field, f"{value!r}: {host!r} is not a valid hostname")
    return host.lower()


def check_bind_address(path: str, value: object, problems: list[str]) -> str | None:
    """Validate an address to listen on (a wildcard is fine); return its canonical form."""
    text = check_string(path, value, problems)
    if text is None:
        return None
    try:
        return _format_address(*parse_address(text, path))
    except InvalidSpec as e:
        problems.append(str(e))
        return None


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def canonical_address(address: object) -> str | None:
    if not isinstance(address, str):
        return None
    try:
        return _format_address(*parse_address(address, ""))
    except InvalidSpec:
        return None


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def check_string(path: str, value: object, problems: list[str]) -> str | None:
    if not isinstance(value, str):
        problems.append(f"{path}: expected a string, got {toml_type_name(value)}")
        return None
    return value


def as_number(path: str, value: object, kind: type, problems: list[str]) -> Number | None:
    """``value`` as ``kind`` (int or float): a bool is not a number; an int is accepted as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        wanted = "an integer" if kind is int else "a number"
        problems.append(f"{path}: expected {wanted}, got {toml_type_name(value)}")
        return None
    if kind is int:
        if not isinstance(value, int):
            problems.append(f"{path}: expected an integer, got float {value!r}")
            return None
        return value
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        problems.append(f"{path}: must be a finite number, got {value!r}")
        return None
    return number


def key_path(prefix: str, key: str) -> str:
    """A key path; keys that are not TOML bare keys are quoted as TOML would."""
    part = key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    return f"{prefix}.{part}" if prefix else part


def toml_type_name(value: object) -> str:
    """The TOML name of a value's type, for messages (scalars named as workflow files name them)."""
    if isinstance(value, bool | int | float | str):
        return type_name(value)
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, datetime):
        return "datetime"
    if isinstance(value, date):
        return "date"
    if isinstance(value, time):
        return "time"
    return type(value).__name__
