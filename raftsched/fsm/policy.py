"""Replicated dispatch policies: quotas per owner and per namespace, pools and resource locks.

An attempt may start (apply accepts its assignment) only when

* every quota that applies to its task - its owner's, its namespace's - has a whole token in its
  bucket and, with ``max_running``, a free running place; and
* it can take every lock its task names, all at once: an exclusive lock has no holder, a shared
  lock no exclusive holder. Acquiring all or nothing in one step means no attempt ever holds one
  lock while it waits for another, so locks cannot deadlock; and
* the pool its task names (if any) exists and has a free slot: fewer than ``slots`` attempts hold
  it. Which waiting attempt gets a freed slot (priority, then age) is the leader's order
  (:mod:`raftsched.leader.dispatch.placement`); apply only keeps the count.

Both are decided in ``apply`` from replicated values only (the bucket refills by the leader's
``now_ms`` in the command, never a clock), so every replica grants the same attempts. What an
attempt took is written on its shard (``ShardAttempt.holds``) and given back, from that record,
when the shard leaves RUNNING: finished, failed, lost, timed out or cancelled. Lock and pool
holders are derived from those records on load; quota records (bucket state and running count)
and pool records (name and slots) are stored.

The leader's dispatcher asks the same question first (:meth:`PolicyBook.check` with its own
:class:`Reservations` of proposals not yet applied), so it rarely proposes what apply refuses and
can tell the attempt why it waits; apply stays the authority.

Hold strings: ``o:<owner>`` and ``n:<namespace>`` (a quota's running place), ``x:<lock>``
(exclusive), ``s:<lock>`` (shared) and ``p:<pool>``. The one-letter prefix keeps them unambiguous, whatever
characters a name has.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from raftsched.abc import StateStore
from raftsched.bounds import MAX_BURST, MAX_POOL_SLOTS, MAX_RATE_MILLI, MAX_RUNNING
from raftsched.errors import InvalidSpec, quote
from raftsched.fsm import keys
from raftsched.fsm.timeline import note
from raftsched.model import (
    MAX_DESCRIPTION_BYTES,
    MAX_LABEL,
    Lock,
    LockMode,
    check_text,
    execution_id,
    validate_name,
)
from raftsched.v1 import log_pb2 as pb

QUOTA_KINDS = ("owner", "namespace")
TOKEN = 1_000_000  # a bucket counts micro-tokens: integer refill from milliseconds, no rounding drift
_PER = {"s": 1, "m": 60, "h": 3600}
_HOLD_PREFIX = {"owner": "o:", "namespace": "n:"}

QuotaKey = tuple[str, str]
"""``(kind, name)`` of a quota: ``("owner", "team-a")``."""


def parse_rate(text: str) -> int:
    """``"50/s"``, ``"300/m"``, ``"2/h"``, ``"0.5/s"`` or a bare number (per second) as
    attempts per second x 1000. Raises InvalidSpec with the accepted forms."""
    raw = text.strip().lower()
    count, _, unit = raw.partition("/")
    per = _PER.get(unit or "s")
    try:
        value = Decimal(count)
    except InvalidOperation:
        value = Decimal(-1)
    if per is None or not value.is_finite() or value < 0:
        raise InvalidSpec(
            "rate", f"{quote(text)} is not a rate: use N/s, N/m or N/h (e.g. 50/s, 0.5/s, 300/m)"
        )
    milli = int(value * 1000 / per)
    if value > 0 and milli == 0:
        raise InvalidSpec("rate", f"{quote(text)} is below the smallest rate (0.001/s)")
    if milli > MAX_RATE_MILLI:
        raise InvalidSpec("rate", f"{quote(text)} is above the largest rate (1000000/s)")
    return milli


def format_rate(rate_milli: int) -> str:
    """The rate as ``N/s`` (``-`` for none)."""
    if not rate_milli:
        return "-"
    value = Decimal(rate_milli) / 1000
    text = f"{value:f}".rstrip("0").rstrip(".") if "." in f"{value:f}" else f"{value:f}"
    return f"{text}/s"


def validate_quota(q: pb.QuotaRecord) -> None:
    """Refuse a quota that is malformed or limits nothing (InvalidSpec naming the field)."""
    if q.kind not in QUOTA_KINDS:
        raise InvalidSpec("quota.kind", f"{quote(q.kind)} is not one of owner, namespace")
    if not q.name:
        raise InvalidSpec(f"quota.{q.kind}", "required (a non-empty name)")
    check_text(q.name, f"quota.{q.kind}", MAX_LABEL)
    if q.rate_milli > MAX_RATE_MILLI:
        raise InvalidSpec("quota.rate", f"{q.rate_milli / 1000:g}/s is above the largest rate (1000000/s)")
    if q.burst > MAX_BURST:
        raise InvalidSpec("quota.burst", f"{q.burst} is above {MAX_BURST}")
    if q.burst and not q.rate_milli:
        raise InvalidSpec("quota.burst", "a burst needs a rate (it is the size of the rate's bucket)")
    if q.max_running > MAX_RUNNING:
        raise InvalidSpec("quota.max_running", f"{q.max_running} is above {MAX_RUNNING}")
    if not q.rate_milli and not q.max_running:
        raise InvalidSpec("quota", "give a rate, a max-running cap or both (this quota would limit nothing)")


def default_burst(rate_milli: int) -> int:
    """A rate's bucket without an explicit burst: one second's worth, at least one attempt."""
    return max(1, -(-rate_milli // 1000))


def tokens_at(q: pb.QuotaRecord, now: int) -> int:
    """Micro-tokens in ``q``'s bucket at leader time ``now`` (refilled, capped at the burst)."""
    if now <= q.refilled_ms:
        return q.tokens_micro
    return min(q.burst * TOKEN, q.tokens_micro + (now - q.refilled_ms) * q.rate_milli)


def describe_limits(q: pb.QuotaRecord) -> str:
    """``rate 50/s, burst 100, max-running 20`` (the limits that are set)."""
    parts = [f"rate {format_rate(q.rate_milli)}, burst {q.burst}"] if q.rate_milli else []
    if q.max_running:
        parts.append(f"max-running {q.max_running}")
    return ", ".join(parts)


def lock_reason(name: str) -> str:
    """The wait reason of an attempt held back by lock ``name`` (held, or wanted by an earlier
    waiter)."""
    return f"lock {name}: held"


def pool_reason(name: str, rec: pb.PoolRecord | None) -> str:
    """The wait reason of an attempt held back by pool ``name`` (full, or an earlier waiter comes
    first; or the pool does not exist)."""
    if rec is None:
        return f"pool {name}: not set (raftsched pool set {name} --slots N)"
    return f"pool {name}: {rec.slots} slot{'s' if rec.slots != 1 else ''}"


def pool_of_reason(reason: str) -> str:
    """The pool a wait reason names (``pool warehouse: 2 slots``), or ""."""
    if not reason.startswith("pool "):
        return ""
    return reason[5:].partition(": ")[0]


def validate_pool(p: pb.PoolRecord) -> None:
    """Refuse a malformed pool (InvalidSpec naming the field)."""
    validate_name(p.name, "pool.name")
    if not 1 <= p.slots <= MAX_POOL_SLOTS:
        raise InvalidSpec("pool.slots", f"{p.slots} is not in 1-{MAX_POOL_SLOTS}")
    check_text(p.description, "pool.description", MAX_DESCRIPTION_BYTES)


def quota_hold(key: QuotaKey) -> str:
    return _HOLD_PREFIX[key[0]] + key[1]


def lock_hold(lock: Lock) -> str:
    return ("s:" if lock.mode == LockMode.SHARED else "x:") + lock.name


class Need(NamedTuple):
    """What an attempt of a task must take to start: its quotas (those set), its locks and its
    pool ("" for none)."""

    quotas: tuple[QuotaKey, ...]
    locks: tuple[Lock, ...]
    pool: str = ""


class Reservations:
    """Policies taken by assignments the leader proposed that have not applied yet (leader-local).

    Counted on top of the replicated state by :meth:`PolicyBook.check`, so the dispatcher does not
    hand out the same token or lock twice while its proposals are in flight."""

    __slots__ = ("by_key", "exclusive", "pool", "quota", "shared")

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, int], Need] = {}
        self.quota: dict[QuotaKey, int] = {}
        self.exclusive: dict[str, int] = {}
        self.shared: dict[str, int] = {}
        self.pool: dict[str, int] = {}

    def add(self, key: tuple[str, int], need: Need) -> None:
        self.remove(key)
        self.by_key[key] = need
        self._count(need, 1)

    def remove(self, key: tuple[str, int]) -> None:
        need = self.by_key.pop(key, None)
        if need is not None:
            self._count(need, -1)

    def clear(self) -> None:
        self.by_key.clear()
        self.quota.clear()
        self.exclusive.clear()
        self.shared.clear()
        self.pool.clear()

    def _count(self, need: Need, delta: int) -> None:
        for q in need.quotas:
            self.quota[q] = self.quota.get(q, 0) + delta
        for lock in need.locks:
            book = self.shared if lock.mode == LockMode.SHARED else self.exclusive
            book[lock.name] = book.get(lock.name, 0) + delta
        if need.pool:
            self.pool[need.pool] = self.pool.get(need.pool, 0) + delta


class LockUser(NamedTuple):
    """A holder of, or a waiter for, a lock (as ``raftsched locks`` shows it)."""

    execution_id: str
    task: str
    shared: bool
    since_ms: int  # holders: when acquired; waiters: when the wait was recorded
    reason: str  # waiters: why it waits


class LockView(NamedTuple):
    name: str
    holders: list[LockUser]
    waiters: list[LockUser]


class PoolView(NamedTuple):
    """A pool as ``raftsched pool list`` shows it."""

    pool: pb.PoolRecord
    holders: list[str]  # execution ids, sorted
    waiting: int  # attempts whose recorded wait reason names the pool


class _Holder(NamedTuple):
    shared: bool
    since_ms: int
    task: str


class _Wait(NamedTuple):
    attempt: int
    reason: str
    since_ms: int
    task: str
    locks: tuple[Lock, ...]


class PolicyBook:
    """The quotas, pools and lock table of the state machine (apply thread; readers hold the FSM
    lock)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.quotas: dict[QuotaKey, pb.QuotaRecord] = {}
        self.pools: dict[str, pb.PoolRecord] = {}
        self.pool_holders: dict[str, dict[str, int]] = {}  # pool -> execution id -> since_ms
        self.holders: dict[str, dict[str, _Holder]] = {}  # lock -> execution id -> holder
        self.exclusive: dict[str, int] = {}  # lock -> its exclusive holders (0 or 1; O(1) checks)
        self.waits: dict[tuple[str, int], _Wait] = {}  # (run id, shard) -> its recorded wait
        self._dirty: set[QuotaKey] = set()

    # -- loading -----------------------------------------------------------------------------------

    def load(self) -> None:
        """Quotas and pools from the store; lock and pool holders and waits are added by
        :meth:`load_shard`."""
        self.quotas.clear()
        self.pools.clear()
        self.pool_holders.clear()
        self.holders.clear()
        self.exclusive.clear()
        self.waits.clear()
        self._dirty.clear()
        for _, value in self.store.scan(keys.QUOTA, keys.QUOTA + keys.END):
            q = pb.QuotaRecord.FromString(value)
            self.quotas[(q.kind, q.name)] = q
        for _, value in self.store.scan(keys.POOL, keys.POOL + keys.END):
            p = pb.PoolRecord.FromString(value)
            self.pools[p.name] = p

    def load_shard(self, run: pb.Run, shard: pb.ShardAttempt, locks: tuple[Lock, ...]) -> None:
        """Rebuild the in-memory view of one unfinished shard (its held locks, its wait)."""
        if shard.state == pb.RUNNING and shard.holds:
            self._grant_locks(
                shard.holds, execution_id(run.run_id, shard.shard, shard.attempt), shard.assigned_ms, run.task
            )
        elif shard.state == pb.PENDING and shard.waiting:
            self.waits[(run.run_id, shard.shard)] = _Wait(
                shard.attempt, shard.waiting, shard.waiting_since_ms, run.task, locks
            )

    # -- the decision --------------------------------------------------------------------------------

    def need(self, owner: str, namespace: str, locks: tuple[Lock, ...], pool: str = "") -> Need | None:
        """What a task with this owner, namespace, locks and pool must take (None: nothing, start
        freely)."""
        quotas: tuple[QuotaKey, ...] = ()
        if self.quotas:
            quotas = tuple(k for k in (("owner", owner), ("namespace", namespace)) if k in self.quotas)
        if not quotas and not locks and not pool:
            return None
        return Need(quotas, locks, pool)

    def pool_free(self, name: str, reserved: Reservations | None = None) -> int:
        """Free slots of pool ``name`` now, counting ``reserved`` as taken (0 if it does not exist)."""
        rec = self.pools.get(name)
        if rec is None:
            return 0
        held = self.pool_holders.get(name)
        used = (len(held) if held else 0) + (reserved.pool.get(name, 0) if reserved is not None else 0)
        return max(0, rec.slots - used)

    def check(self, need: Need, now: int, reserved: Reservations | None = None) -> str:
        """Why ``need`` cannot be taken at ``now`` ("" if it can), counting ``reserved`` as taken.

        A reason names its cause and nothing that changes while the cause lasts (not whether the
        bucket or the running cap binds at this instant, not who holds a lock): a waiting
        attempt's recorded reason, and so its run record, changes only when its cause does."""
        for key in need.quotas:
            q = self.quotas.get(key)
            if q is None:
                continue
            extra = reserved.quota.get(key, 0) if reserved is not None else 0
            if (q.max_running and q.running + extra >= q.max_running) or (
                q.rate_milli and tokens_at(q, now) - extra * TOKEN < TOKEN
            ):
                return f"quota {key[0]}={key[1]}: {describe_limits(q)}"
        if need.pool and not self.pool_free(need.pool, reserved):
            return pool_reason(need.pool, self.pools.get(need.pool))
        for lock in need.locks:
            held = self.holders.get(lock.name)
            x = self.exclusive.get(lock.name, 0)
            n = len(held) if held else 0
            if reserved is not None:
                rx = reserved.exclusive.get(lock.name, 0)
                x += rx
                n += rx + reserved.shared.get(lock.name, 0)
            if x if lock.mode == LockMode.SHARED else n:
                return lock_reason(lock.name)
        return ""

    def acquire(self, need: Need, now: int, exec_id: str, task: str) -> list[str]:
        """Take ``need`` for ``exec_id`` (after :meth:`check` passed); returns the holds to record."""
        holds: list[str] = []
        for key in need.quotas:
            q = self.quotas.get(key)
            if q is None:
                continue
            if q.rate_milli:
                q.tokens_micro = tokens_at(q, now) - TOKEN
                q.refilled_ms = max(q.refilled_ms, now)
            q.running += 1
            self._dirty.add(key)
            holds.append(quota_hold(key))
        for lock in sorted(need.locks, key=_by_name):  # one order for everyone
            holds.append(lock_hold(lock))
        if need.pool:
            holds.append("p:" + need.pool)
        self._grant_locks(holds, exec_id, now, task)
        return holds

    def release(self, holds: Iterable[str], exec_id: str) -> None:
        """Give back what ``exec_id`` held (its shard left RUNNING)."""
        for hold in holds:
            kind, name = hold[:2], hold[2:]
            if kind == "p:":
                users = self.pool_holders.get(name)
                if users is not None and users.pop(exec_id, None) is not None and not users:
                    del self.pool_holders[name]
            elif kind in ("x:", "s:"):
                held = self.holders.get(name)
                if held is not None and held.pop(exec_id, None) is not None:
                    if kind == "x:":
                        self.exclusive[name] -= 1
                        if not self.exclusive[name]:
                            del self.exclusive[name]
                    if not held:
                        del self.holders[name]
            else:
                key: QuotaKey = ("owner" if kind == "o:" else "namespace", name)
                q = self.quotas.get(key)
                if q is not None and q.running:
                    q.running -= 1
                    self._dirty.add(key)

    def _grant_locks(self, holds: Iterable[str], exec_id: str, since_ms: int, task: str) -> None:
        for hold in holds:
            kind = hold[:2]
            if kind == "p:":
                self.pool_holders.setdefault(hold[2:], {})[exec_id] = since_ms
            elif kind in ("x:", "s:"):
                name = hold[2:]
                held = self.holders.setdefault(name, {})
                if exec_id not in held and kind == "x:":
                    self.exclusive[name] = self.exclusive.get(name, 0) + 1
                held[exec_id] = _Holder(kind == "s:", since_ms, task)

    # -- waits -----------------------------------------------------------------------------------------

    def note_wait(
        self, run: pb.Run, shard: pb.ShardAttempt, reason: str, now: int, locks: tuple[Lock, ...]
    ) -> bool:
        """Record why ``shard``'s pending attempt waits; False if that reason is recorded already."""
        if shard.waiting == reason:
            return False
        shard.waiting = reason
        shard.waiting_since_ms = now if reason else 0
        key = (run.run_id, shard.shard)
        if reason:
            note(run, "waiting", now, shard, reason=reason)
            self.waits[key] = _Wait(shard.attempt, reason, now, run.task, locks)
            quota = _quota_of_reason(reason)
            q = self.quotas.get(quota) if quota is not None else None
            if q is not None:
                q.waited += 1
                self._dirty.add(quota)  # type: ignore[arg-type]
        else:
            self.waits.pop(key, None)
        return True

    def forget_wait(self, run_id: str, shard: int) -> None:
        self.waits.pop((run_id, shard), None)

    # -- quota commands ----------------------------------------------------------------------------

    def set_quota(self, body: pb.QuotaRecord, now: int) -> tuple[pb.QuotaRecord, bool]:
        """Create or replace a quota (validated first); returns it and whether it is new. A new
        bucket starts full; a replaced one keeps its tokens (up to the new burst) and counts."""
        validate_quota(body)
        key = (body.kind, body.name)
        old = self.quotas.get(key)
        q = pb.QuotaRecord(
            kind=body.kind,
            name=body.name,
            rate_milli=body.rate_milli,
            burst=(body.burst or default_burst(body.rate_milli)) if body.rate_milli else 0,
            max_running=body.max_running,
            refilled_ms=now,
            updated_ms=now,
        )
        if old is not None:
            q.running, q.waited = old.running, old.waited
            q.tokens_micro = min(q.burst * TOKEN, tokens_at(old, now) if old.rate_milli else q.burst * TOKEN)
        else:
            q.tokens_micro = q.burst * TOKEN
        self.quotas[key] = q
        self._dirty.add(key)
        return q, old is None

    def delete_quota(self, kind: str, name: str) -> pb.QuotaRecord | None:
        q = self.quotas.pop((kind, name), None)
        if q is not None:
            self._dirty.discard((kind, name))
            self.store.delete(keys.quota_key(kind, name))
        return q

    # -- pool commands -----------------------------------------------------------------------------

    def set_pool(self, body: pb.PoolRecord, now: int) -> pb.PoolRecord:
        """Create or resize a pool (validated first). Attempts holding it keep their slots: a pool
        shrunk below them starts no new attempt until enough have finished."""
        validate_pool(body)
        p = pb.PoolRecord(name=body.name, slots=body.slots, updated_ms=now, description=body.description)
        self.pools[p.name] = p
        self.store.put(keys.pool_key(p.name), p.SerializeToString(deterministic=True))
        return p

    def delete_pool(self, name: str) -> pb.PoolRecord | None:
        """Remove pool ``name`` (the caller refused it while tasks name it). Attempts holding it
        keep their slots until they end; the hold is given back as usual."""
        p = self.pools.pop(name, None)
        if p is not None:
            self.store.delete(keys.pool_key(name))
        return p

    def flush(self) -> None:
        """Store the quota records changed by the command being applied (once each)."""
        for key in sorted(self._dirty):
            q = self.quotas.get(key)
            if q is not None:
                self.store.put(keys.quota_key(*key), q.SerializeToString(deterministic=True))
        self._dirty.clear()

    # -- reads -------------------------------------------------------------------------------------

    def quota_view(self, now: int) -> list[pb.QuotaRecord]:
        """Every quota by kind and name, its bucket refilled to ``now`` (copies)."""
        out = []
        for key in sorted(self.quotas):
            q = pb.QuotaRecord()
            q.CopyFrom(self.quotas[key])
            if q.rate_milli:
                q.tokens_micro = tokens_at(q, now)
                q.refilled_ms = max(q.refilled_ms, now)
            out.append(q)
        return out

    def pool_view(self) -> list[PoolView]:
        """Every pool by name, with its holders and how many attempts wait for it (copies)."""
        waiting: dict[str, int] = {}
        for w in self.waits.values():
            name = pool_of_reason(w.reason)
            if name:
                waiting[name] = waiting.get(name, 0) + 1
        out = []
        for name in sorted(self.pools):
            p = pb.PoolRecord()
            p.CopyFrom(self.pools[name])
            out.append(PoolView(p, sorted(self.pool_holders.get(name, {})), waiting.get(name, 0)))
        return out

    def lock_view(self) -> list[LockView]:
        """Every lock held or waited for, by name: holders by execution id, waiters by time."""
        infos: dict[str, LockView] = {}
        for name in sorted(self.holders):
            info = infos[name] = LockView(name, [], [])
            for exec_id in sorted(self.holders[name]):
                h = self.holders[name][exec_id]
                info.holders.append(LockUser(exec_id, h.task, h.shared, h.since_ms, ""))
        waits = sorted(self.waits.items(), key=lambda kv: (kv[1].since_ms, kv[0]))
        for (run_id, shard), w in waits:
            if not w.reason.startswith("lock "):
                continue  # waiting for a quota, not for its locks
            for lock in w.locks:
                if lock.name not in infos:
                    infos[lock.name] = LockView(lock.name, [], [])
                infos[lock.name].waiters.append(
                    LockUser(
                        execution_id(run_id, shard, w.attempt),
                        w.task,
                        lock.mode == LockMode.SHARED,
                        w.since_ms,
                        w.reason,
                    )
                )
        return [infos[name] for name in sorted(infos)]


def _by_name(lock: Lock) -> str:
    return lock.name


def _quota_of_reason(reason: str) -> QuotaKey | None:
    """The quota a wait reason names (``quota owner=A: ...``), or None."""
    if not reason.startswith("quota "):
        return None
    subject = reason[6:].rpartition(": ")[0]
    kind, _, name = subject.partition("=")
    return (kind, name) if kind in QUOTA_KINDS else None
