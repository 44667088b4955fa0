"""What the console's views are given and return: :class:`Ctx` in, :class:`View` or
:class:`Redirect` out."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from raftsched.client import Client
from raftsched.security.auth import Permission, Principal
from raftsched.security.authz import PUBLIC, required_permission
from raftsched.web.sessions import Session

__all__ = ["REFRESH_S", "Ctx", "Redirect", "View", "local_path"]

_ADMIN: Final = "/raftsched.v1.Admin/"
REFRESH_S: Final = 3  # how often a live page polls (seconds)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class View:
    """A page to render: ``template`` with ``context``, answered with ``status``."""

    template: str
    context: Mapping[str, Any]
    status: int = 200
    title: str = ""


@dataclass(frozen=True, slots=True)
class Redirect:
    location: str
    flash: tuple[str, str] | None = None  # (kind, message) shown once on the next page


@dataclass
class Ctx:
    """One request as a view sees it."""

    console: Any  # the Console serving the request
    session: Session
    principal: Principal
    client: Client
    query: Mapping[str, str]
    form: Mapping[str, str]
    path: str
    now_ms: int
    live: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def can(self, rpc: str, namespace: str = "") -> bool:
        """Whether the caller's role allows ``rpc`` (an Admin method name) on an object of
        ``namespace`` (asked of the authorization table; the RPC checks again)."""
        need = required_permission(_ADMIN + rpc)
        if need == PUBLIC:
            return True
        return self.principal.may(Permission(need)) and self.principal.in_namespace(namespace)

    def cached(self, what: Hashable, read: Callable[[], T]) -> T:
        """``read()``, or its result for this session's credential from the last
        :data:`~raftsched.web.cache.TTL_MS` (see :mod:`raftsched.web.cache`): for cluster-wide
        figures only, never for what an action changes or a page about one object shows."""
        result: T = self.console.reads.get(self.session.token, what, read)
        return result

    def arg(self, name: str, default: str = "") -> str:
        return self.query.get(name, default).strip()

    def page(self) -> int:
        try:
            return max(1, int(self.query.get("page", "1")))
        except ValueError:
            return 1


def local_path(target: str) -> str:
    """``target`` if it is a path on this console (not another site), else ""."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return ""
