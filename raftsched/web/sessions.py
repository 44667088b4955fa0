"""Console sessions: a random id in an HttpOnly, SameSite=Strict cookie, mapped on this node to
the signed-in token and a CSRF token bound to the session.

Why a server-side mapping rather than the token itself in the cookie: the bearer token then
never leaves the node after sign-in (it is not resent with every request, not stored by the
browser, not readable by script even through a bug that bypassed HttpOnly), signing out really
ends the session (the id is forgotten here; a copied cookie stops working), and an idle session
expires on its own. The cost: sessions are per node and in memory, so a user signs in again on
another node or after this node restarts.

Reads no clock (it is injected); thread-safe (one lock; the console handles
requests on worker threads).
"""

from __future__ import annotations

import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from raftsched.security.auth import Principal

__all__ = ["COOKIE", "Session", "SessionStore"]

COOKIE: Final = "raftsched_console"
IDLE_MS: Final = 8 * 3600 * 1000
MAX_SESSIONS: Final = 1024


@dataclass
class Session:
    """One browser's session. ``token`` is None until sign-in (and always with auth off);
    ``principal`` is what the node's verifier said about the token at sign-in (it is re-checked
    on every request); ``client`` the SDK client that carries the token (owned here), for
    actions and consistent reads; ``reader`` the one for this node's local reads;
    ``consistent_until_ms``: until then (just after an action) reads go to the leader too."""

    sid: str
    csrf: str
    created_ms: int
    seen_ms: int
    token: str | None = None
    principal: Principal | None = None
    flash: list[tuple[str, str]] = field(default_factory=list)
    client: Any = None
    reader: Any = None
    consistent_until_ms: int = 0

    def csrf_ok(self, sent: str) -> bool:
        """Whether ``sent`` is this session's CSRF token (constant-time)."""
        return bool(sent) and hmac.compare_digest(sent.encode(), self.csrf.encode())


class SessionStore:
    """At most ``max_sessions`` sessions, least recently used evicted first; a session unused
    for ``idle_ms`` is gone. ``on_drop`` is called (outside the lock) with every session dropped,
    to close what it holds."""

    def __init__(
        self,
        now_ms: Callable[[], int],
        *,
        idle_ms: int = IDLE_MS,
        max_sessions: int = MAX_SESSIONS,
        token_urlsafe: Callable[[int], str] = secrets.token_urlsafe,
        on_drop: Callable[[Session], None] = lambda s: None,
    ) -> None:
        self._now_ms = now_ms
        self._idle_ms = idle_ms
        self._max = max_sessions
        self._random = token_urlsafe
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, sid: str | None) -> Session | None:
        """The live session of ``sid`` (touched: its idle time restarts), or None."""
        if not sid:
            return None
        dropped: list[Session] = []
        now = self._now_ms()
        with self._lock:
            session = self._sessions.get(sid)
            if session is not None and now - session.seen_ms > self._idle_ms:
                dropped.append(self._sessions.pop(sid))
                session = None
            if session is not None:
                session.seen_ms = now
                self._sessions.move_to_end(sid)
        self._drop(dropped)
        return session

    def new(self) -> Session:
        """A fresh, signed-out session with its own CSRF token."""
        now = self._now_ms()
        session = Session(sid=self._random(32), csrf=self._random(32), created_ms=now, seen_ms=now)
        dropped: list[Session] = []
        with self._lock:
            self._sessions[session.sid] = session
            while len(self._sessions) > self._max:
                dropped.append(self._sessions.popitem(last=False)[1])
        self._drop(dropped)
        return session

    def sign_in(self, old: Session, token: str | None, principal: Principal) -> Session:
        """A new session (new id and CSRF token: a session id known before sign-in is worthless
        after it) holding ``token``; ``old`` is dropped."""
        self.drop(old.sid)
        session = self.new()
        session.token = token
        session.principal = principal
        return session

    def drop(self, sid: str) -> None:
        """Forget ``sid`` (sign-out); idempotent."""
        with self._lock:
            session = self._sessions.pop(sid, None)
        self._drop([session] if session is not None else [])

    def drop_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        self._drop(sessions)

    def _drop(self, sessions: list[Session]) -> None:
        for session in sessions:
            self._on_drop(session)
