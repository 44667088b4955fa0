"""Executors inside the state machine: membership, draining, and the assignment of attempts.

The :class:`ExecutorBook` keeps the replicated executor records (join, drain, leave: a leave
settles every attempt that ran on it as lost), flags the tasks no live executor could ever run
(``unplaceable``, with one alert), and applies the leader's assignments: an attempt starts only
on a live, undrained executor it fits on now, and only if its task's quotas and locks allow it
(:mod:`raftsched.fsm.policy`). Like the rest of the FSM it is deterministic and reaches the rest
of the state only through the :class:`ExecutorHost` protocol.
"""

from __future__ import annotations

from typing import Protocol

from raftsched import bounds
from raftsched.errors import InvalidSpec, quote
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm import keys
from raftsched.fsm.access import TokenBook
from raftsched.fsm.effects import DispatchAttempt, Effect, ExecutorChanged
from raftsched.fsm.policy import PolicyBook
from raftsched.fsm.records import BookHost, TaskState
from raftsched.fsm.rules import Reject
from raftsched.fsm.runs import RunBook
from raftsched.fsm.timeline import hot_assigned, note
from raftsched.fsm.workflow_model import is_internal, split_internal
from raftsched.fsm.workflows import WorkflowBook
from raftsched.model import execution_id, validate_name
from raftsched.sharding.placement import Need, could_ever_fit, fits_now, need_of, validate_capacity
from raftsched.v1 import log_pb2 as pb

MAX_EXECUTOR_SLOTS = bounds.MAX_SLOTS

Handled = tuple[pb.CommandResult, tuple[Effect, ...]]


class ExecutorHost(BookHost, Protocol):
    """What the executor book needs from the rest of the state machine (``SchedulerState``).

    Called on the apply thread only, while a command applies."""

    @property
    def access(self) -> TokenBook: ...
    @property
    def runs(self) -> RunBook: ...
    @property
    def policy(self) -> PolicyBook: ...
    @property
    def wf(self) -> WorkflowBook: ...

    def number_executor(self, rec: pb.ExecutorRecord) -> None:
        """Its hot-path number, if it has none and numbering is on (raftsched.fsm.hot)."""
        ...

    def promote_hot_on(self, executor: str) -> None:
        """The hot runs running on ``executor`` go to the cold path (raftsched.fsm.hot)."""
        ...


class ExecutorBook:
    """The executor records, the unplaceable flags and the assignments (see module doc)."""

    def __init__(self, host: ExecutorHost) -> None:
        self.host = host
        self.store = host.store  # the state's store, never replaced (a restore refills it)
        self.executors: dict[str, pb.ExecutorRecord] = {}
        self.unplaceable: set[str] = set()  # tasks flagged unplaceable (derived from their records)

    def load(self) -> None:
        """The executor records from the store."""
        self.executors.clear()
        for _, value in self.store.scan(keys.EXECUTOR, keys.EXECUTOR + keys.END):
            executor = pb.ExecutorRecord()
            executor.ParseFromString(value)
            self.executors[executor.name] = executor

    def load_flags(self) -> None:
        """The unplaceable flags, from the task records (the tasks are loaded already)."""
        self.unplaceable.clear()
        self.unplaceable.update(name for name, st in self.host.tasks.items() if st.unplaceable)

    def put(self, rec: pb.ExecutorRecord) -> None:
        """Store ``rec`` as it is now."""
        self.store.put(keys.executor_key(rec.name), rec.SerializeToString(deterministic=True))

    # -- membership --------------------------------------------------------------------------------

    def join(self, cmd: pb.Command, now: int) -> Handled:
        host = self.host
        body = cmd.executor_join
        validate_name(body.name, "executor.name")
        if not 1 <= body.slots <= MAX_EXECUTOR_SLOTS:
            raise InvalidSpec("executor.slots", f"{body.slots} out of range (1-{MAX_EXECUTOR_SLOTS})")
        if len(body.labels) > 32 or any(len(k) > 128 or len(v) > 128 for k, v in body.labels.items()):
            raise InvalidSpec("executor.labels", "at most 32 labels, keys and values at most 128 characters")
        validate_capacity(body.cpu, body.memory_mb)
        old = self.executors.get(body.name)
        if old is not None and body.principal and self._bound_elsewhere(old, body.principal, now):
            # The name is bound to the identity that first registered it (auth on).
            raise Reject(
                "permission_denied",
                f"executor name {body.name!r} is bound to another principal ({old.principal})",
            )
        rec = pb.ExecutorRecord(
            name=body.name,
            slots=body.slots,
            labels=dict(body.labels),
            alive=True,
            joined_ms=now,
            principal=body.principal or (old.principal if old is not None else ""),
            namespaces=sorted(body.namespaces),
            cpu=body.cpu,
            memory_mb=body.memory_mb,
        )
        if old is not None and old.alive and old.draining:
            # Registering again (a reconnect after a leader change) does not undo a drain; a
            # drained executor gets work again only after it has left and joins anew.
            rec.draining, rec.draining_ms, rec.draining_reason = True, old.draining_ms, old.draining_reason
            rec.health_drain = old.health_drain
        if old is not None:
            rec.number = old.number  # a number is the executor's for good
        host.number_executor(rec)
        self.executors[body.name] = rec
        self.put(rec)
        for name in sorted(self.unplaceable):  # a fitting executor clears the flag
            st = host.tasks.get(name)
            if st is None:
                self.unplaceable.discard(name)
                continue
            s = st.spec
            if could_ever_fit(
                need_of(s.resource_cpu, s.resource_memory_mb, dict(s.selector)),
                rec.cpu,
                rec.memory_mb,
                rec.labels,
            ):
                st.unplaceable = ""
                self.unplaceable.discard(name)
                host.put_task(st)
        return pb.CommandResult(ok=True), (ExecutorChanged(body.name, True),)

    def _bound_elsewhere(self, old: pb.ExecutorRecord, principal: str, now: int) -> bool:
        """Whether ``old``'s name is bound to a principal other than ``principal``. A name bound to
        a token is freed when that token is revoked or expires (so an executor can move to a new
        token); a certificate subject keeps its names."""
        if not old.principal or old.principal == principal:
            return False
        if old.principal.startswith("token:"):
            tok = self.host.access.get(old.principal.removeprefix("token:"))
            if tok is None or tok.info.revoked or (tok.info.expires_ms and tok.info.expires_ms <= now):
                return False
        return True

    def drain(self, cmd: pb.Command, now: int) -> Handled:
        """No new attempts for a live executor; the ones it runs go on (and end by the usual
        rules). Draining one that already drains changes nothing (same result).

        ``health``: the executor drains itself because its disk or execution log is nearly full;
        an ``executor_unhealthy`` alert names it, and it may undo that drain (``resume``) once
        below its threshold again. An operator's drain over it stands: the executor's resume
        does not undo it (nor does a resume undo an operator's drain)."""
        body = cmd.drain_executor
        rec = self.executors.get(body.name)
        if rec is None or not rec.alive:
            raise Reject("not_found", f"executor {quote(body.name)} is not a live member")
        if len(body.reason) > 500:
            raise InvalidSpec("reason", "at most 500 characters")
        if body.resume:
            if rec.draining and rec.health_drain:
                rec.draining, rec.draining_ms, rec.draining_reason = False, 0, ""
                rec.health_drain = False
                self.put(rec)
            return pb.CommandResult(ok=True), (ExecutorChanged(body.name, True),)
        if not rec.draining:
            rec.draining = True
            rec.draining_ms = now
            rec.draining_reason = body.reason or "drained"
            rec.health_drain = body.health
            self.put(rec)
            if body.health:
                self.host.raise_alert(
                    alerts_mod.EXECUTOR_UNHEALTHY,
                    f"executor {body.name} drains itself: {rec.draining_reason}; its running "
                    "attempts finish, no new work is placed on it until it recovers",
                    now,
                    executor=body.name,
                )
        elif rec.health_drain and not body.health:
            rec.health_drain = False  # an operator's drain now: the executor may not undo it
            rec.draining_reason = body.reason or "drained"
            self.put(rec)
        return pb.CommandResult(ok=True), (ExecutorChanged(body.name, True),)

    def leave(self, cmd: pb.Command, now: int) -> Handled:
        """An executor left (or was declared dead): every attempt assigned to it is lost and retried
        by policy. Scans the active runs: membership changes are rare."""
        runs = self.host.runs
        body = cmd.executor_leave
        rec = self.executors.get(body.name)
        if rec is None:
            raise Reject("not_found", f"executor {body.name!r} is not registered")
        rec.alive = False
        rec.left_ms = now
        rec.left_reason = body.reason or ("declared dead" if body.dead else "left")
        rec.draining = False
        rec.health_drain = False
        self.put(rec)
        effects: list[Effect] = [ExecutorChanged(body.name, False)]
        why = f"executor {body.name} {'died' if body.dead else 'left'}: {rec.left_reason}"
        unstarted = set(body.unstarted)
        host = self.host
        host.promote_hot_on(body.name)  # its hot attempts are lost the cold way, below
        # The runs with an attempt running on it, from the usage the state keeps (exactly the
        # RUNNING shards, by executor), in run id order: the same runs, in the same order, as
        # walking every active run, without parsing a backlog of pending ones.
        running = runs.usage.running.items()
        on_it = sorted({run_id for (run_id, _shard), (ex, _need) in running if ex == body.name})
        for run_id in on_it:
            run = runs.get(run_id)
            if run is None:
                continue  # finished by an earlier one's settlement (a workflow's)
            for shard in run.shards:
                if shard.state == pb.RUNNING and shard.executor == body.name:
                    note(run, "executor_lost", now, shard, executor=body.name, reason=why)
                    lost = pb.AttemptResult(
                        run_id=run_id,
                        shard=shard.shard,
                        attempt=shard.attempt,
                        error=why,
                        lost=True,
                        retry_at_ms=body.retry_at_ms,
                        unstarted=execution_id(run_id, shard.shard, shard.attempt) in unstarted,
                    )
                    runs.settle(run, shard, lost, now, cmd.epoch, effects)
                    if run_id not in runs.active:
                        break
        return pb.CommandResult(ok=True), tuple(effects)

    # -- placement ---------------------------------------------------------------------------------

    def check_placeable(self, st: TaskState, need: Need, now: int) -> None:
        """Flag ``st`` (and alert once) when no live executor could ever run an attempt needing
        ``need``; clear the flag when one could."""
        host = self.host
        fits = any(
            rec.alive and could_ever_fit(need, rec.cpu, rec.memory_mb, rec.labels)
            for rec in self.executors.values()
        )
        if fits:
            if st.unplaceable:
                st.unplaceable = ""
                self.unplaceable.discard(st.spec.name)
                host.put_task(st)
            return
        if st.unplaceable:
            return
        live = sum(1 for rec in self.executors.values() if rec.alive)
        st.unplaceable = f"needs {need.text()}: none of the {live} live executors could ever run it"
        self.unplaceable.add(st.spec.name)
        host.put_task(st)
        workflow = split_internal(st.spec.name)[0] if is_internal(st.spec.name) else ""
        host.raise_alert(
            alerts_mod.UNPLACEABLE,
            f"task {st.spec.name} is unplaceable: {st.unplaceable}; its attempts wait for a fitting executor",
            now,
            task=st.spec.name,
            workflow=workflow,
            owner=st.spec.owner,
            namespace=st.spec.namespace,
        )

    def assign(self, cmd: pb.Command, now: int) -> Handled:
        """Record which executor runs which attempt; only then may the leader send it.

        An attempt starts only if its task's quotas and locks allow it now (raftsched.fsm.policy);
        otherwise the assignment is refused and the reason recorded on the shard. The leader's
        ``waits`` record why attempts it held back wait (run show, explain, locks)."""
        host = self.host
        runs, tasks, policy, wf = host.runs, host.tasks, host.policy, host.wf
        usage, lead = runs.usage, host.leader_effects
        accepted = refused = 0
        effects: list[Effect] = []
        for wait in cmd.assign_attempts.waits:
            run = runs.get(wait.run_id)
            shard = run.shards[wait.shard] if run is not None and wait.shard < len(run.shards) else None
            if run is None or shard is None or shard.attempt != wait.attempt or shard.state != pb.PENDING:
                continue  # started or finished meanwhile: nothing waits any more
            st = tasks.get(run.task)
            locks = st.spec.locks if st is not None else ()
            if policy.note_wait(run, shard, wait.reason[:300], now, locks):
                runs.save(run)
        for a in cmd.assign_attempts.assignments:
            run = runs.get(a.run_id)
            shard = run.shards[a.shard] if run is not None and a.shard < len(run.shards) else None
            executor = self.executors.get(a.executor)
            if (
                run is None
                or shard is None
                or shard.attempt != a.attempt
                or shard.state != pb.PENDING
                or shard.not_before_ms > cmd.now_ms  # a retry never starts before its backoff ends
                or executor is None
                or not executor.alive
                or run.held
                or executor.draining  # drained after the leader chose it: the attempt waits on
            ):
                refused += 1
                continue
            res_need = runs.need_for_run(run)
            key = (a.run_id, a.shard)
            if not fits_now(
                res_need,
                executor.slots,
                executor.cpu,
                executor.memory_mb,
                executor.labels,
                usage.used(a.executor),
            ):
                refused += 1  # it would over-commit the executor's slots, cpu or memory
                continue
            st = tasks.get(run.task)
            need = (
                policy.need(st.spec.owner, st.spec.namespace, st.spec.locks, st.spec.pool)
                if st is not None
                else None
            )
            if need is not None:
                why = policy.check(need, now)
                if why:
                    # The leader thought it could start; a policy says not yet (it stays pending).
                    refused += 1
                    if policy.note_wait(run, shard, why, now, need.locks):
                        runs.save(run)
                    continue
                shard.holds[:] = policy.acquire(
                    need, now, execution_id(a.run_id, a.shard, a.attempt), run.task
                )
            if shard.waiting:
                shard.waiting = ""
                shard.waiting_since_ms = 0
                policy.forget_wait(a.run_id, a.shard)
            usage.take(key, a.executor, res_need)
            shard.state = pb.RUNNING
            shard.executor = a.executor
            shard.assigned_ms = now
            run.state = pb.RUNNING
            hot_assigned(run, shard, now, a.executor)
            runs.save(run)
            if lead:
                effects.append(
                    DispatchAttempt(
                        a.run_id,
                        run.task,
                        run.nominal_ms,
                        a.shard,
                        a.attempt,
                        a.executor,
                        cmd.epoch,
                        not (run.command or run.params_json or run.env),
                        run.task_version,
                        run.backfill,
                        now,
                    )
                )
            if run.workflow_run:
                wf.task_run_assigned(run, shard, now)
            accepted += 1
        return pb.CommandResult(ok=True, accounted=accepted, refused=refused), tuple(effects)
