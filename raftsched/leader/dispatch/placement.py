"""Where waiting attempts go: the ring, each executor's queue, and one admission check.

An attempt that waits for an executor waits in the queue of the executor the ring picks for its
shard (its *owner*), in start order (:mod:`raftsched.leader.queue`: priority, then nominal time);
a tick looks only at executors with free slots and at the head of their queues. An attempt that
declares cpu, memory or labels walks the ring instead, from its shard's place, to the first
executor with room for it now (the check the state machine repeats at apply). Regular work goes
first; backfill only into the slots it leaves, within its workflow's share.

Every placement path asks the same :class:`Admission` before it proposes an attempt: the task's
quotas, pool and locks (:mod:`raftsched.fsm.policy`) must allow it, and an attempt held back is
named in the AssignAttempts command with the reason.

A pool's free slots go to its waiting attempts in start order across every executor's queue
(priority, then age): each tick, of the attempts that name the pool and could start now (ready,
and their executor has a free slot), only the first ``free`` in that order are admitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from raftsched.fsm.effects import AttemptReady
from raftsched.fsm.hot_slots import LIVE, SlotTable
from raftsched.fsm.policy import Need as PolicyNeed
from raftsched.fsm.policy import Reservations, lock_reason
from raftsched.fsm.view import StateView
from raftsched.fsm.workflow_model import SEP, is_internal, split_internal, trigger_name
from raftsched.leader.dispatch.leases import Holdings, Key
from raftsched.leader.dispatch.settings import MAX_WAITS_PER_COMMAND
from raftsched.leader.queue import StartOrder, WaitQueue, start_order
from raftsched.model import Lock
from raftsched.sharding.placement import NO_NEED, Need, fits_now
from raftsched.sharding.ring import ShardRing, shard_order
from raftsched.v1 import log_pb2 as logpb

# Ring owners remembered per leadership at most (an entry is ~200 bytes: a million tasks would
# otherwise keep ~200 MB on the leader for a cache that mostly misses).
OWNER_CACHE_MAX = 100_000


def _trigger_of(step: str) -> str:
    """``wf#step`` → ``wf#``: the trigger task whose fires start the workflow's runs (the
    overload hold holds it while its steps' attempts wait)."""
    return trigger_name(split_internal(step)[0])


@dataclass(slots=True)
class Waiting:
    ready: AttemptReady
    order: StartOrder  # its place in the executor's queue (raftsched.leader.queue)
    owner: str = ""  # the ring's executor for this shard (cached; recomputed when the ring changes)
    reserved_for: str = ""  # an AssignAttempts naming this executor is in flight
    need: Need = NO_NEED  # cpu, memory and labels it needs (NO_NEED: slots only, owner first)
    candidates: tuple[str, ...] = ()  # for a declared need: executors in ring order it may use
    task_owner: str = ""  # the task's owner, namespace and locks (quota and lock checks)
    namespace: str = ""
    locks: tuple[Lock, ...] = ()
    pool: str = ""  # the task's pool ("" for none)
    reason: str = ""  # the wait reason last proposed for it (sent again only when it changes)
    # A retry (issue 29 §3): the executors earlier attempts of its shard were assigned to; it goes
    # to another executor when one may take it (empty: the ring's choice, as for a first attempt).
    avoid: frozenset[str] = frozenset()
    # A hot run's seq (raftsched.fsm.hot), from the entry that made it ready; 0 when not known.
    seq: int = 0


class Admission:
    """The quota and lock check of one placement walk, the one every placement path asks (the
    ring owner's queues and the ring walk of attempts with a declared need alike).

    An attempt over a quota or wanting a held lock waits, named in the command with its reason
    (once per reason: sent again only when it changes). A lock an earlier attempt of the walk
    waits for is held for the later ones too, so a stream of shared holders cannot starve an
    exclusive waiter."""

    __slots__ = ("_has_quotas", "_now_ms", "_pool_turns", "_queued_locks", "_reserved", "_v", "_waits")

    def __init__(
        self,
        v: StateView,
        now_ms: int,
        reserved: Reservations,
        cmd: logpb.Command,
        pool_turns: dict[str, set[Key]] | None = None,
    ) -> None:
        self._v = v
        self._now_ms = now_ms
        self._reserved = reserved
        self._has_quotas = v.has_quotas
        self._queued_locks: set[str] = set()
        self._waits = cmd.assign_attempts.waits  # where the wait reasons are named
        # pool -> the waiting attempts whose turn it is this walk (see :func:`pool_turns`)
        self._pool_turns = pool_turns or {}

    def admit(self, w: Waiting) -> PolicyNeed | Literal[False] | None:
        """False: ``w`` waits. Otherwise the policies to reserve for it (None: none apply)."""
        if not (self._has_quotas or w.locks or w.pool):
            return None
        need = self._v.policy_need(w.task_owner, w.namespace, w.locks, w.pool)
        if need is None:
            return None
        why = next((lock_reason(lk.name) for lk in need.locks if lk.name in self._queued_locks), "")
        if not why and need.pool:
            turn = self._pool_turns.get(need.pool)
            if turn is None or (w.ready.run_id, w.ready.shard) not in turn:
                why = self._v.pool_reason(need.pool)  # full, or an earlier waiter comes first
        why = why or self._v.policy_check(need, self._now_ms, self._reserved)
        if not why:
            return need
        self._queued_locks.update(lk.name for lk in need.locks if why == lock_reason(lk.name))
        if why != w.reason and len(self._waits) < MAX_WAITS_PER_COMMAND:
            w.reason = why  # (the rest are named in the next commands)
            r = w.ready
            self._waits.add(run_id=r.run_id, shard=r.shard, attempt=r.attempt, reason=why)
        return False


class Placement:
    """The waiting attempts of one leadership and where they may go.

    Not thread-safe: the dispatcher's thread owns it. Reservations are taken from and given back
    to ``holdings``."""

    __slots__ = (
        "_owners",
        "_ring",
        "backfill_waiting",
        "holdings",
        "members",
        "pooled",
        "queues",
        "restricted",
        "sized",
        "waiting",
        "waiting_per_task",
    )

    def __init__(self, holdings: Holdings) -> None:
        self.holdings = holdings
        # The ring's owner of each (task, shard) asked for, computed once per ring (an md5 and a
        # walk of the ring per attempt otherwise); emptied whenever the ring is replaced.
        self._owners: dict[Key, str] = {}
        self._ring = ShardRing(())  # where new attempts go
        # Live members, draining ones included: they heartbeat, hold leases and can be declared
        # dead, but the ring (placement) leaves them out.
        self.members: frozenset[str] = frozenset()
        # Executors that may only receive work of some namespaces (their token's, auth on); the
        # others take any task. Empty in a cluster without auth, so placement pays nothing for it.
        self.restricted: dict[str, frozenset[str]] = {}
        self.waiting: dict[Key, Waiting] = {}
        # How many of them each task has (the leader driver's overload hold reads it from its own
        # thread, a key at a time: LeaderDriver.dispatch_waiting); a workflow step's count under
        # its workflow's trigger task too (``wf#``: the task whose fires start its runs).
        self.waiting_per_task: dict[str, int] = {}
        # The same attempts by executor, in start order: a tick looks only at executors with free
        # slots and at the head of their queues (sorting and hashing every waiting attempt on every
        # tick made dispatch slow down as a backlog grew: bench/executors.py).
        self.queues: dict[str, WaitQueue[Waiting]] = {}
        # Waiting attempts that declare cpu, memory or labels, in arrival order: they walk the ring
        # to the first executor with room, so they are kept apart from the per-owner queues.
        self.sized: dict[Key, Waiting] = {}
        self.backfill_waiting = 0  # waiting attempts that are backfill (skip their pass when none)
        # Waiting attempts whose task names a pool (their turns are decided across all queues).
        self.pooled: dict[Key, Waiting] = {}

    @property
    def ring(self) -> ShardRing:
        return self._ring

    @ring.setter
    def ring(self, ring: ShardRing) -> None:
        """A new ring (the membership changed): every cached owner is forgotten with the old one."""
        self._ring = ring
        self._owners = {}

    def rebuild(self, v: StateView) -> None:
        """The membership changed: derive the ring from it again (identical on every node) and
        requeue every waiting attempt.

        An executor that registers again, drains or resumes without changing which executors
        are placeable (and none is restricted to namespaces) leaves the ring as it was: every
        waiting attempt keeps its owner, so the ring, the owners remembered and the queues are
        kept (a re-registration emptied the owner cache: an md5 and a ring walk per attempt
        until it refilled, and every queue was rebuilt)."""
        placeable = v.placeable_executors()
        self.members = frozenset(v.live_executors())
        restricted = v.restricted_executors()
        if not restricted and not self.restricted and self._ring.members == tuple(sorted(placeable)):
            return
        self.ring = ShardRing(placeable)
        self.restricted = restricted
        self.queues.clear()
        for key, w in self.waiting.items():
            if w.need is not NO_NEED:
                w.candidates = _elsewhere_first(self._candidates(v, w.ready.task, w.ready.shard), w.avoid)
                continue
            w.owner = self._owner(v, w.ready.task, w.ready.shard, w.avoid)
            self._queue(w.owner).add(key, w)

    def _queue(self, executor: str) -> WaitQueue[Waiting]:
        queue = self.queues.get(executor)
        if queue is None:
            queue = self.queues[executor] = WaitQueue()
        return queue

    def _candidates(self, v: StateView, task: str, shard: int) -> tuple[str, ...]:
        """Where the shard may go, best first: the task's ring walk without executors barred from
        its namespace, rotated to start at the shard's own place (:func:`shard_order`), so the
        shards of one run spread over distinct executors among those allowed."""
        walk = self._ring.walk(task)
        if self.restricted:
            namespace = v.task_namespace(task)
            walk = tuple(n for n in walk if (a := self.restricted.get(n)) is None or namespace in a)
        return shard_order(walk, shard)

    def _owner(self, v: StateView, task: str, shard: int, avoid: frozenset[str] = frozenset()) -> str:
        """The executor whose queue the shard waits in: the first of :meth:`_candidates` ("" if
        none may take it: the attempt waits for one to join); a retry's first candidate it has
        not tried yet, if there is one (else, as before, the first)."""
        if not self.restricted and not avoid:
            key = (task, shard)
            owner = self._owners.get(key)
            if owner is None:
                if len(self._owners) >= OWNER_CACHE_MAX:
                    self._owners = {}  # a bound: a miss costs what every lookup cost before
                owner = self._owners[key] = self._ring.owner(task, shard) or ""
            return owner
        candidates = _elsewhere_first(self._candidates(v, task, shard), avoid)
        return candidates[0] if candidates else ""

    def wait(self, v: StateView, ready: AttemptReady, seq: int = 0) -> None:
        """``ready`` waits for an executor (replacing what waited in its place). ``seq``: its
        run's hot seq when the caller knows it (a ReadyColumns row)."""
        key = (ready.run_id, ready.shard)
        self.unwait(key)
        spec = v.task_spec(ready.task)
        avoid: frozenset[str] = frozenset()
        if ready.attempt > 1 and spec is not None and spec.retry_elsewhere:
            avoid = v.tried_executors(ready.run_id, ready.shard, ready.attempt)
        w = Waiting(
            ready,
            start_order(
                spec.priority if spec is not None else 5, ready.nominal_ms, ready.run_id, ready.shard
            ),
            self._owner(v, ready.task, ready.shard, avoid),
            avoid=avoid,
            seq=seq,
        )
        if spec is not None:
            w.task_owner, w.namespace, w.locks, w.pool = spec.owner, spec.namespace, spec.locks, spec.pool
        self.waiting[key] = w
        per_task = self.waiting_per_task
        per_task[ready.task] = per_task.get(ready.task, 0) + 1
        if is_internal(ready.task):
            trigger = _trigger_of(ready.task)
            per_task[trigger] = per_task.get(trigger, 0) + 1
        if w.pool:
            self.pooled[key] = w
        need = v.need_hint(ready.task, ready.run_id)
        if need is not NO_NEED:
            # Declared cpu, memory or labels: it walks the ring instead of waiting for its owner.
            candidates = _elsewhere_first(self._candidates(v, ready.task, ready.shard), avoid)
            w.need, w.candidates, w.owner = need, candidates, ""
            self.sized[key] = w
        else:
            self._queue(w.owner).add(key, w)
        if ready.backfill_share:
            self.backfill_waiting += 1

    def wait_rows(self, v: StateView, rows: Iterable[tuple[AttemptReady, int]]) -> None:
        """Each ``(ready, seq)`` waits, as :meth:`wait` makes it wait (the rows of a ReadyColumns:
        first attempts of shard 0). One loop for the entry: a row of a plain task (no declared
        need, not a workflow's, not in the ring's restricted namespaces, not waiting already,
        not backfill, a first attempt) waits without :meth:`wait`'s general steps; any other
        goes through :meth:`wait`."""
        tasks, waiting, pooled, per_task = v.tasks, self.waiting, self.pooled, self.waiting_per_task
        restricted = bool(self.restricted)
        for ready, seq in rows:
            run_id, task = ready.run_id, ready.task
            st = tasks.get(task)
            key = (run_id, ready.shard)
            if st is None or restricted or ready.attempt > 1 or ready.backfill_share or key in waiting:
                self.wait(v, ready, seq)
                continue
            spec = st.spec
            # StateView.need_hint's test: a declared need, or a workflow task's, is read from the run.
            if spec.resource_cpu or spec.resource_memory_mb or spec.selector or is_internal(task):
                self.wait(v, ready, seq)
                continue
            # _owner's cache hit, inline (no retry, no restricted executors: a plain lookup)
            shard = ready.shard
            owner = self._owners.get((task, shard))
            if owner is None:
                owner = self._owner(v, task, shard)
            w = Waiting(
                ready,
                (-spec.priority, ready.nominal_ms, run_id, shard),  # start_order(...), inline
                owner,
                "",
                NO_NEED,
                (),
                spec.owner,
                spec.namespace,
                spec.locks,
                spec.pool,
                "",
                frozenset(),
                seq,
            )
            waiting[key] = w
            per_task[task] = per_task.get(task, 0) + 1
            if w.pool:
                pooled[key] = w
            queue = self.queues.get(owner)
            if queue is None:
                queue = self._queue(owner)
            queue.add(key, w)

    def unwait(self, key: Key, lease_to: str = "") -> bool:
        """The attempt at ``key`` waits no more (assigned, replaced or cancelled): give back what
        its reservation held. ``lease_to``: the executor it is about to be leased to; when its
        reservation was for that executor and it declares no need, the slot is kept for the
        lease (:meth:`Holdings.hand_over`) and True returned: the caller's lease must not take
        another (:meth:`Holdings.give_back_slot` if it takes none)."""
        w = self.waiting.pop(key, None)
        if w is None:
            return False
        per_task, task = self.waiting_per_task, w.ready.task
        left = per_task[task] - 1
        if left:
            per_task[task] = left
        else:
            del per_task[task]
        if SEP in task:  # a workflow step: its trigger's count too (is_internal, inline)
            trigger = _trigger_of(task)
            left = per_task[trigger] - 1
            if left:
                per_task[trigger] = left
            else:
                del per_task[trigger]
        if self.pooled:
            self.pooled.pop(key, None)
        if w.need is not NO_NEED:
            del self.sized[key]
        else:
            queue = self.queues.get(w.owner)
            if queue is not None:
                queue.remove(key)
        if w.ready.backfill_share:
            self.backfill_waiting -= 1
        if w.reserved_for:
            holdings = self.holdings
            if w.reserved_for == lease_to and w.need is NO_NEED:
                # Holdings.hand_over, called only when it has anything to give back (its own
                # tests, inline: once per attempt on the leader's loop, and a plain attempt
                # holds none of them).
                if holdings.held.running or holdings.backfill_busy or holdings.reserved.by_key:
                    holdings.hand_over(key)
                return True
            holdings.release(key, w.reserved_for)
        return False

    def release(self, v: StateView, assignments: Iterable[tuple[Key, str]]) -> None:
        """These ``(attempt, executor)`` assignments were proposed and failed or were refused:
        the attempts may be placed again."""
        for key, executor in assignments:
            w = self.waiting.get(key)
            if w is not None and w.reserved_for == executor:
                w.reserved_for = ""
                self.holdings.release(key, executor)
                # Refused: perhaps the task's owner or locks changed since it started waiting.
                spec = v.task_spec(w.ready.task)
                if spec is not None:
                    w.task_owner, w.namespace, w.locks = spec.owner, spec.namespace, spec.locks
                    w.pool = spec.pool
                    if w.pool:
                        self.pooled[key] = w
                    else:
                        self.pooled.pop(key, None)

    def assign(
        self,
        v: StateView,
        now_ms: int,
        dead: set[str],
        budget: int,
        cmd: logpb.Command,
        hot: HotAssignments | None = None,
    ) -> list[tuple[Key, str]]:
        """Add to ``cmd`` (an AssignAttempts) assignments of waiting attempts to executors with a
        free slot (at most ``budget``), and the wait reasons of those the admission holds back;
        reserve what each assignment takes. Returns the ``(attempt, executor)`` pairs reserved, in
        the command's order (what :meth:`release` gives back if the proposal fails).

        ``hot`` (the columnar bodies allowed): an assignment of a live hot run to a numbered
        executor goes there instead, as an AssignColumns row (its pair in ``hot.assigned``, not
        in the list returned), exactly as
        :func:`raftsched.leader.columns.split_assignments` would move it out of ``cmd``."""
        assigned: list[tuple[Key, str]] = []
        placeable = v.placeable_executors()
        free = self.holdings.free_slots(placeable, dead)
        total_slots = sum(placeable.values())
        turns = pool_turns(
            v,
            self.pooled.values(),
            free,
            now_ms,
            self.holdings.reserved,
            backfill_busy=len(self.holdings.backfill_busy),
            total_slots=total_slots,
        )
        admission = Admission(v, now_ms, self.holdings.reserved, cmd, turns)
        admit, has_quotas = admission.admit, v.has_quotas
        if hot is not None:
            hot.slots = v.hot_tables()[0]  # valid in this view, which the walk holds
            hot.numbers = {}
        for owner in sorted(free):
            slots = free[owner]
            queue = self.queues.get(owner)
            if slots <= 0 or not queue:
                continue  # backpressure: its attempts wait for a free slot
            # Regular work first; backfill only in the slots it leaves, within its share.
            for backfill in (False, True) if self.backfill_waiting else (False,):
                for w in queue:
                    r = w.ready
                    if w.reserved_for or r.not_before_ms > now_ms or (r.backfill_share > 0) != backfill:
                        continue
                    # Admission.admit's first test, inline: no quota, lock or pool applies (the
                    # common case) admits with nothing to reserve.
                    policy = admit(w) if has_quotas or w.locks or w.pool else None
                    if policy is False:
                        continue
                    if backfill and len(self.holdings.backfill_busy) >= _share(total_slots, r):
                        break
                    self._reserve(v, w, owner, policy, cmd, assigned, hot)
                    slots -= 1
                    budget -= 1
                    if slots <= 0 or budget <= 0:
                        break
                if slots <= 0 or budget <= 0:
                    break
            free[owner] = slots
            if budget <= 0:
                break
        if self.sized and budget > 0:
            self._assign_sized(v, now_ms, free, total_slots, budget, cmd, admission, assigned, hot)
        return assigned

    def _assign_sized(
        self,
        v: StateView,
        now_ms: int,
        free: dict[str, int],
        total_slots: int,
        budget: int,
        cmd: logpb.Command,
        admission: Admission,
        assigned: list[tuple[Key, str]],
        hot: HotAssignments | None,
    ) -> None:
        """Attempts with a declared need, oldest first: each goes to the first executor in ring
        order from its shard's position that has a free slot and the cpu, memory and labels it
        needs now (the check the state machine repeats at apply); none has room: it waits."""
        if not any(count > 0 for count in free.values()):
            return
        executors = v.executors
        held = self.holdings.held
        for w in sorted(self.sized.values(), key=lambda w: w.order):  # priority, then oldest
            r = w.ready
            if w.reserved_for or r.not_before_ms > now_ms:
                continue
            policy = admission.admit(w)
            if policy is False:
                continue  # over quota or a lock is held: it waits (the state machine would refuse)
            if r.backfill_share and len(self.holdings.backfill_busy) >= _share(total_slots, r):
                continue
            target = ""
            for name in w.candidates:
                if free.get(name, 0) <= 0:
                    continue
                rec = executors.get(name)
                if rec is None or not rec.alive or rec.draining:
                    continue
                _, cpu, mem = held.used(name)
                if fits_now(w.need, rec.slots, rec.cpu, rec.memory_mb, rec.labels, (0, cpu, mem)):
                    target = name
                    break
            if not target:
                continue
            self._reserve(v, w, target, policy, cmd, assigned, hot)
            free[target] -= 1
            budget -= 1
            if budget <= 0:
                return

    def _reserve(
        self,
        v: StateView,
        w: Waiting,
        executor: str,
        policy: PolicyNeed | None,
        cmd: logpb.Command,
        assigned: list[tuple[Key, str]],
        hot: HotAssignments | None,
    ) -> None:
        r = w.ready
        key = (r.run_id, r.shard)
        need = w.need
        if policy is None and need is NO_NEED and not r.backfill_share:
            # Holdings.reserve of a plain attempt, inline (once per attempt on the leader's
            # loop): it takes only a slot.
            used = self.holdings.used
            used[executor] = used.get(executor, 0) + 1
        else:
            self.holdings.reserve(key, executor, need, policy, r.backfill_share > 0)
        w.reserved_for = executor
        if hot is not None:
            # split_assignments' test: a live hot run (shard 0) on a numbered executor. A seq
            # learnt from the run's fire entry answers it without parsing the run id (seqs are
            # never reused: live means that run); otherwise (an attempt a takeover inherited,
            # or a seq no longer live) the run id is looked up as before.
            seq = w.seq
            if seq:  # StateView.hot_live, inline (once per attempt on the leader's loop)
                slots = hot.slots
                j = seq - slots.base
                state = slots.state
                if not (0 <= j < len(state) and state[j] in LIVE):
                    seq = 0
            if not seq and r.shard == 0:
                seq = v.hot_seq(r.run_id)
            number = 0
            if seq:  # the executor's number, looked up once per walk (its view's numbering)
                numbers = hot.numbers
                number = numbers.get(executor, -1)
                if number < 0:
                    number = numbers[executor] = v.executor_number(executor)
            if number:
                hot.seqs.append(seq)
                hot.attempts.append(r.attempt)
                hot.executors.append(number)
                hot.assigned.append((key, executor))
                return
        assigned.append((key, executor))
        cmd.assign_attempts.assignments.add(
            run_id=r.run_id, shard=r.shard, attempt=r.attempt, executor=executor
        )


class HotAssignments:
    """The AssignColumns rows of one placement walk (:meth:`Placement.assign`): row i assigns
    the run of ``seqs[i]`` (shard 0, attempt ``attempts[i]``) to executor number
    ``executors[i]``; ``assigned[i]`` is its ``(attempt, executor)`` pair, as reserved."""

    __slots__ = ("assigned", "attempts", "executors", "numbers", "seqs", "slots")

    def __init__(self) -> None:
        # The state's slot table while a walk fills these (Placement.assign sets it), and the
        # numbers of the executors it assigned to (valid in the walk's view only: reset with it).
        self.slots: SlotTable = SlotTable()
        self.numbers: dict[str, int] = {}
        self.seqs: list[int] = []
        self.attempts: list[int] = []
        self.executors: list[int] = []
        self.assigned: list[tuple[Key, str]] = []


def _elsewhere_first(candidates: tuple[str, ...], avoid: frozenset[str]) -> tuple[str, ...]:
    """``candidates`` with those in ``avoid`` (a retry's earlier executors) moved to the end, in
    their order: a retry tries them only when no other executor may take it."""
    if not avoid:
        return candidates
    return tuple(c for c in candidates if c not in avoid) + tuple(c for c in candidates if c in avoid)


def pool_turns(
    v: StateView,
    pooled: Iterable[Waiting],
    free: dict[str, int],
    now_ms: int,
    reserved: Reservations,
    backfill_busy: int = 0,
    total_slots: int = 0,
) -> dict[str, set[Key]]:
    """For each pool with waiting attempts: the keys of those whose turn it is now - the first of
    them in start order (regular work before backfill, then priority, then age) that could start
    this tick (not reserved, backoff over, an executor with a free slot, a backfill's within its
    share: ``backfill_busy`` of ``total_slots``), as many as the pool has free slots."""
    by_pool: dict[str, list[Waiting]] = {}
    for w in pooled:
        if w.reserved_for or w.ready.not_before_ms > now_ms:
            continue
        if w.ready.backfill_share and backfill_busy >= _share(total_slots, w.ready):
            continue  # its share is full: it could not start now, so it takes no pool turn
        if w.need is NO_NEED and free.get(w.owner, 0) <= 0:
            continue  # its executor is full: it could not start now, so it takes no pool turn
        by_pool.setdefault(w.pool, []).append(w)
    turns: dict[str, set[Key]] = {}
    for name, ws in by_pool.items():
        slots = v.pool_free(name, reserved)
        ws.sort(key=_order)
        turns[name] = {(w.ready.run_id, w.ready.shard) for w in ws[:slots]}
    return turns


def _order(w: Waiting) -> tuple[bool, StartOrder]:
    # Regular work first: a backfill's attempts are the oldest and would otherwise come first.
    return (w.ready.backfill_share > 0, w.order)


def _share(total_slots: int, r: AttemptReady) -> int:
    """How many slots backfill attempts of ``r``'s workflow may hold at once."""
    return max(1, total_slots * r.backfill_share // 100)
