"""Secrets on the executor: resolve ``{{ secret.NAME }}`` references and mask the values.

A task's params and a workflow task's env may hold references (syntax: :mod:`raftsched.secretref`).
The cluster only ever stores and sends the reference; the executor that runs the attempt looks
each name up here, just before it starts the attempt, and masks every value it knows as ``***``
in the output tails and error it reports and in its own log lines. So the value never enters the
replicated log, snapshots, backups, the audit trail or the console.

Where values come from, in this order:

1. the executor's environment: ``RAFTSCHED_SECRET_<NAME>`` (NAME upper-cased, ``-`` as ``_``);
2. the secrets path the executor was given (``raftsched-executor --secrets PATH``), one of
   * a directory with one file per secret, named by the secret, its content the value (one
     trailing newline dropped): the layout of Kubernetes and Docker secrets; names starting with
     ``.`` are skipped (Kubernetes' ``..data`` links);
   * a ``.toml`` file of top-level ``name = "value"`` strings;
   * any other file: ``NAME=value`` lines (``#`` comments, blank lines and an ``export`` prefix
     allowed; one pair of surrounding quotes is dropped from the value).

A secrets file (or any file of the directory) that every user may read (mode ``o+r``) is refused
with an error that names it and says how to fix it; so is one that cannot be read or parsed.
The path is read at start (a problem stops the executor) and again when a secret is looked up
and the file (or directory) changed, so rotated secrets are picked up. Error messages name files,
lines and secrets, never values. ``RAFTSCHED_SECRET_*`` variables are not passed on to commands:
an attempt sees only the secrets its definition references.

Thread safety: lookups and masking run on the executor's event loop; the logging filter may run
on any thread and only reads an immutable tuple.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from raftsched.errors import InvalidSpec
from raftsched.secretref import substitute

__all__ = [
    "MASK",
    "SECRET_ENV_PREFIX",
    "Masker",
    "MaskingFilter",
    "MissingSecret",
    "SecretStore",
    "StreamMasker",
    "env_name",
    "resolve_attempt",
    "without_secret_env",
]

SECRET_ENV_PREFIX = "RAFTSCHED_SECRET_"
MASK = "***"
MAX_SECRETS_FILE_BYTES = 1024 * 1024
_FILE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")
_ENV_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*=(.*)")
# A cut output tail may start with the end of a value: mask such a leading piece from this long.
_MIN_EDGE = 4


def env_name(name: str) -> str:
    """The variable that holds secret ``name``: ``db-password`` → ``RAFTSCHED_SECRET_DB_PASSWORD``."""
    return SECRET_ENV_PREFIX + name.upper().replace("-", "_")


def without_secret_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the ``RAFTSCHED_SECRET_*`` variables (what a command inherits)."""
    return {k: v for k, v in environ.items() if not k.startswith(SECRET_ENV_PREFIX)}


class MissingSecret(Exception):
    """A referenced secret is not set on this executor; the message names it and where it was sought."""


class SecretStore:
    """The secrets one executor can resolve (see the module docstring for sources and formats).

    ``path`` is a secrets file or directory (None: the environment only); a problem with it
    raises :class:`InvalidSpec` naming ``secrets`` and the file. ``environ`` defaults to
    ``os.environ`` (read at each lookup).
    """

    def __init__(self, path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.path = Path(path) if path else None
        self._environ = os.environ if environ is None else environ
        self._file: dict[str, str] = {}
        self._stamp: tuple[int, ...] | None = None
        if self.path is not None:
            self._refresh()

    def lookup(self, name: str) -> str | None:
        """The value of secret ``name``, or None when neither source has it.

        Raises :class:`MissingSecret` when the secrets path changed and now cannot be used.
        """
        value = self._environ.get(env_name(name))
        if value is not None:
            return value
        if self.path is None:
            return None
        try:
            self._refresh()
        except InvalidSpec as exc:
            raise MissingSecret(f"secret {name!r}: {exc}") from None
        return self._file.get(name)

    def where(self, name: str) -> str:
        """Where secret ``name`` was sought, for a message."""
        places = [f"environment variable {env_name(name)}"]
        if self.path is not None:
            places.append(f"{'directory' if self.path.is_dir() else 'file'} {self.path}")
        else:
            places.append("no secrets file (raftsched-executor --secrets PATH)")
        return " or ".join(places)

    def values(self) -> list[str]:
        """Every value this executor knows (environment and path), for masking."""
        found = [v for k, v in self._environ.items() if k.startswith(SECRET_ENV_PREFIX)]
        return [*found, *self._file.values()]

    def _refresh(self) -> None:
        assert self.path is not None
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return
        self._file = _read_path(self.path)
        self._stamp = stamp


def _stamp(path: Path) -> tuple[int, ...]:
    """What changes when the file or directory (or a file in it) changes: mtimes, sizes, modes."""
    try:
        st = path.stat()
        parts = [st.st_mtime_ns, st.st_size, st.st_mode, st.st_ino]
        if stat.S_ISDIR(st.st_mode):
            for entry in sorted(os.listdir(path)):
                try:
                    member = (path / entry).stat()
                except OSError:
                    continue  # a dangling link (a rotation under way): not a secret, skipped
                parts += [member.st_mtime_ns, member.st_size, member.st_mode, member.st_ino]
    except OSError as exc:
        raise InvalidSpec("secrets", f"cannot read {path}: {exc.strerror or exc}") from None
    return tuple(parts)


def _check_private(path: Path, st: os.stat_result) -> None:
    if st.st_mode & stat.S_IROTH:
        mode = stat.S_IMODE(st.st_mode)
        raise InvalidSpec(
            "secrets",
            f"{path} is readable by every user of this host (mode {mode:04o}); refusing to use it: "
            f"run chmod o-rwx {path} (0600 or 0640; Kubernetes: defaultMode: 0440)",
        )


def _read_text(path: Path) -> str:
    try:
        st = path.stat()
        _check_private(path, st)
        if st.st_size > MAX_SECRETS_FILE_BYTES:
            raise InvalidSpec("secrets", f"{path}: {st.st_size} bytes, at most {MAX_SECRETS_FILE_BYTES}")
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InvalidSpec("secrets", f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidSpec("secrets", f"{path} is not UTF-8 text") from None


def _read_path(path: Path) -> dict[str, str]:
    if path.is_dir():
        found: dict[str, str] = {}
        for entry in sorted(os.listdir(path)):
            member = path / entry
            if entry.startswith(".") or not member.is_file() or not _FILE_NAME.fullmatch(entry):
                continue
            value = _read_text(member)
            found[entry] = value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")
        return found
    text = _read_text(path)
    if path.suffix == ".toml":
        return _parse_toml(path, text)
    return _parse_env_file(path, text)


def _parse_toml(path: Path, text: str) -> dict[str, str]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message names a line and column, never the text there.
        raise InvalidSpec("secrets", f"{path}: not valid TOML ({exc})") from None
    found: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(value, str):
            raise InvalidSpec("secrets", f"{path}: {key!r} must be a string, got {type(value).__name__}")
        if not _FILE_NAME.fullmatch(key):
            raise InvalidSpec("secrets", f"{path}: {key!r} is not a secret name (letters, digits, _ and -)")
        found[key] = value
    return found


def _parse_env_file(path: Path, text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ENV_LINE.fullmatch(stripped)
        if match is None:
            raise InvalidSpec(
                "secrets", f"{path} line {number}: not NAME=value (NAME: letters, digits, _ and -)"
            )
        value = match.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        found[match.group(1)] = value
    return found


def resolve_attempt(
    params_json: str, env: Mapping[str, str], store: SecretStore
) -> tuple[str, dict[str, str], list[str]]:
    """``(params_json, env, values)`` with every reference replaced by its value; ``values`` are
    the values used. Raises :class:`MissingSecret` naming the first secret that is not set."""
    used: list[str] = []

    def lookup(name: str) -> str:
        value = store.lookup(name)
        if value is None:
            raise MissingSecret(
                f"secret {name!r} is not set on this executor (sought in {store.where(name)})"
            )
        used.append(value)
        return value

    if "{{" in params_json:
        params: Any = json.loads(params_json)
        params_json = json.dumps(_substitute_all(params, lookup), separators=(",", ":"))
    resolved = {key: substitute(value, lookup) for key, value in env.items()}
    return params_json, resolved, used


def _substitute_all(value: Any, lookup: Any) -> Any:
    if isinstance(value, str):
        return substitute(value, lookup)
    if isinstance(value, dict):
        return {k: _substitute_all(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_all(v, lookup) for v in value]
    return value


class Masker:
    """Replaces secret values with ``***``. Longer values first, so one that contains another is
    masked whole; each value also in its JSON-escaped form (as ``RAFTSCHED_PARAMS`` carries it)."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[str] = set()
        for value in values:
            if not value:
                continue
            forms.add(value)
            escaped = json.dumps(value)[1:-1]
            forms.add(escaped)
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
        self.values = tuple(sorted(forms, key=lambda v: (-len(v), v)))

    def __bool__(self) -> bool:
        return bool(self.values)

    def mask(self, text: str) -> str:
        """``text`` with every known value replaced by ``***``."""
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def mask_tail(self, text: str) -> str:
        """:meth:`mask`, and for a cut tail also a leading end of a value (at least 4 characters)."""
        text = self.mask(text)
        if not text.startswith("\u2026[truncated "):
            return text
        head, newline, body = text.partition("\n")
        for value in self.values:
            for size in range(len(value) - 1, _MIN_EDGE - 1, -1):
                if body.startswith(value[-size:]):
                    body = MASK + body[size:]
                    break
        return head + newline + body


class StreamMasker:
    """Masks a byte stream fed in chunks (output written to a file as it comes): every value of
    ``masker`` becomes ``***`` even when a chunk boundary splits it, because the last
    ``longest value - 1`` bytes are held back until more data (or :meth:`flush`) comes."""

    def __init__(self, masker: Masker) -> None:
        self._values = sorted({v.encode("utf-8") for v in masker.values}, key=lambda v: (-len(v), v))
        self._keep = max((len(v) for v in self._values), default=1) - 1
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """The masked bytes that can be written now (possibly fewer than fed)."""
        if not self._values:
            return chunk
        data = self._mask(self._held + chunk)
        cut = max(0, len(data) - self._keep)
        self._held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        """The held-back rest, masked (call at the end of the stream)."""
        rest, self._held = self._mask(self._held), b""
        return rest

    def _mask(self, data: bytes) -> bytes:
        for value in self._values:
            if value in data:
                data = data.replace(value, MASK.encode())
        return data


class MaskingFilter(logging.Filter):
    """A handler filter that masks the store's secret values in every record it passes."""

    def __init__(self, store: SecretStore) -> None:
        super().__init__()
        self._store = store
        self._masker = Masker(store.values())

    def refresh(self, extra: Iterable[str] = ()) -> None:
        """Mask the store's current values and ``extra`` from now on."""
        self._masker = Masker([*self._store.values(), *extra])

    def filter(self, record: logging.LogRecord) -> bool:
        masker = self._masker
        if not masker:
            return True
        message = record.getMessage()
        masked = masker.mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = masker.mask(record.exc_text)
        return True

    def install(self) -> list[logging.Handler]:
        """Add this filter to every handler of the root logger; returns them (for :meth:`remove`)."""
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(self)
        return handlers

    def remove(self, handlers: Iterable[logging.Handler]) -> None:
        for handler in handlers:
            handler.removeFilter(self)
