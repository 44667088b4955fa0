"""The consensus node over pysyncobj: :class:`PySyncObjNode` and its SyncObj subclass.

Decisions forced by pysyncobj (docs/architecture.md, "Facts about the libraries"):

* ONE replicated entry point, ``_raftsched_apply(data: bytes)``; ``data`` is our protobuf command.
  pysyncobj numbers replicated methods by sorted name, so a single stable name can never break a
  stored journal;
* batch mode with short periods and callbacks; nothing here blocks on ``sync=True``;
* a cluster secret is mandatory: without pysyncobj's ``password`` the Raft port accepts pickle
  from anyone (remote code execution); the port itself is hardened in ``transport.py``;
* a custom snapshot serializer that copies LMDB (no fork, so no clash with gRPC threads), on a
  writer thread; the file's header is JSON, never pickle (``snapshot.py``);
* the SyncObj is built on the calling thread, which must be the main thread and stay alive (the
  tick thread exits when its constructing thread does);
* the pysyncobj private members this module overrides or reads, each with the bug it fixes and
  the test that shows it, are listed in ``patches.py`` (a test checks that every one still
  exists in the installed pysyncobj);
* no linearizable read is possible through pysyncobj's own API (no ReadIndex, no lease: a leader
  cut off from its followers keeps ``_isLeader()`` for ``leaderFallbackTimeout``). Reads are
  made linearizable above this module by a read barrier through the one entry point
  (:meth:`PySyncObjNode.propose_barrier`, :mod:`raftsched.leader.reads`); pysyncobj's
  ``__lastResponseTime`` is read only to *report* how recently a majority answered
  (``RaftStatus.contact_age_ms``), never to decide whether to answer.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjException, replicated
from pysyncobj import syncobj as _syncobj
from pysyncobj.node import TCPNode

from raftsched.abc import (
    BarrierCallback,
    CommitHook,
    FormatTooNew,
    Leadership,
    ProposeCallback,
    ProposeError,
    RaftStatus,
)
from raftsched.clockwatch import ClockWatch
from raftsched.config.types import RaftTuning
from raftsched.consensus.applier import Applier
from raftsched.consensus.pysyncobj.patches import cap_unverified_commit, leader_wait, release_covered
from raftsched.consensus.pysyncobj.snapshot import SnapshotWriter, read_header
from raftsched.consensus.pysyncobj.status import LEADER, RAFT_STATES, decode_status, propose_error
from raftsched.consensus.pysyncobj.transport import CLOCK_KEY, GuardedTransport, RaftPortGuard, bind_address
from raftsched.errors import CannotStart, SnapshotFormatError
from raftsched.logfields import leadership_fields

log = logging.getLogger(__name__)


def _raft_clock() -> float:
    """pysyncobj's own clock, which times its tick (append deadlines, ``__lastResponseTime``,
    election timers): ``pysyncobj.monotonic``, CLOCK_MONOTONIC_RAW on Linux, not the NTP-slewed
    CLOCK_MONOTONIC of ``time.monotonic``. The two drift apart with uptime (measured: 0.256 s
    after 18 h on the dev machine), so a time pysyncobj stored is compared with this only.
    Looked up at each call, as pysyncobj's tick does (``syncobj.monotonicTime``)."""
    return float(_syncobj.monotonicTime())


class _NoBindTraceback(logging.Filter):
    """pysyncobj logs a traceback when its Raft port cannot be bound; PySyncObjNode raises
    CannotStart naming the address instead, so that record is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "failed to perform initialization"


logging.getLogger("pysyncobj.syncobj").addFilter(_NoBindTraceback())


class _Raft(SyncObj):  # type: ignore[misc]
    """The SyncObj subclass. Its only replicated method hands bytes to the applier."""

    _raftsched_votes_after: int | None = None  # see _raftsched_may_vote (set in __init__)

    def __init__(
        self,
        enqueue: Callable[[int, bytes], None],
        *args: Any,
        guard: RaftPortGuard | None = None,
        hold: Callable[[], bool] | None = None,
        leader_heard: Callable[[], None] | None = None,
        clock_stamp: Callable[[str, str], tuple[Any, ...] | None] | None = None,
        clock_heard: Callable[[str, str, Any], None] | None = None,
        dial: Callable[[str], str] | None = None,
        rebuilding: bool = False,
        **kwargs: Any,
    ) -> None:
        # The hooks are in place before SyncObj.__init__ starts the tick thread.
        self._raftsched_clock_stamp: Callable[[str, str], tuple[Any, ...] | None] = clock_stamp or (
            lambda _peer, _kind: None
        )
        self._raftsched_clock_heard: Callable[[str, str, Any], None] = clock_heard or (
            lambda _peer, _kind, _stamp: None
        )
        self._raftsched_enqueue = enqueue
        self._raftsched_guard = guard or RaftPortGuard("raft")
        self._raftsched_dial: Callable[[str], str] = dial or (lambda addr: addr)
        self._raftsched_hold: Callable[[], bool] = hold or (lambda: False)
        self._raftsched_leader_heard: Callable[[], None] = leader_heard or (lambda: None)
        self._raftsched_heard_at: float | None = None  # monotonic; an append from a leader
        # A node rebuilt from nothing (see PySyncObjNode): None once it has caught up; -1 until a
        # leader is heard; then the leader's commit index it must apply before it votes again.
        self._raftsched_votes_after: int | None = -1 if rebuilding else None
        super().__init__(*args, transportClass=GuardedTransport, **kwargs)

    def _onTick(self, timeToWait: float = 0.0) -> None:
        # patches.py: leader-tick-pacing. pysyncobj's tick drains the proposal queue after it
        # sends the appends, and a leader sends only on the first tick past its append deadline:
        # so the tick had to be short (5 ms) for a proposal to wait little for the next append,
        # and every node woke 200 times a second for it. A leader now drains the queue at the
        # start of its tick too (an append sent in this tick carries every entry proposed so
        # far), and waits for socket events at most until its next append is due: it sends on
        # time whatever ``raft.auto_tick_period`` is, which then bounds only what is not paced
        # by messages (election timers, a follower's forwarding of a proposal, a 1-node commit).
        if self._isLeader():
            self._checkCommandsToApply()
            if timeToWait > 0:
                # pysyncobj's deadline is on its own clock (_raft_clock), not time.monotonic.
                due_in = self._SyncObj__newAppendEntriesTime - _raft_clock()
                timeToWait = leader_wait(timeToWait, due_in, self._SyncObj__conf.appendEntriesPeriod)
        super()._onTick(timeToWait)

    def _SyncObj__connectedToAnyone(self) -> bool:
        # patches.py: campaign-hold. pysyncobj campaigns only while this is true. A node that
        # joins, is being stopped, or was removed must not campaign: without pre-vote its
        # higher term would depose the leader (a joining node times out before the leader's
        # first append reaches it).
        if self._raftsched_hold():
            return False
        return bool(super()._SyncObj__connectedToAnyone())

    def _SyncObj__parseChangeClusterRequest(self, command: Any) -> Any:
        # patches.py: membership-dial-address. A membership entry names a node by its own Raft
        # address; this node may dial that peer elsewhere (a raft_via proxy), and pysyncobj
        # knows the peer by the dialled address.
        request = super()._SyncObj__parseChangeClusterRequest(command)
        if not isinstance(request, list) or len(request) < 2:
            return request
        try:
            raw = str(request[2].address) if len(request) >= 3 else str(request[1])
            dial = self._raftsched_dial(raw)
        except Exception:
            log.exception("mapping a membership entry's address failed")
            return request
        return [request[0], dial, TCPNode(dial)]

    def _SyncObj__onBecomeLeader(self) -> None:
        # patches.py: new-term-transmissions. pysyncobj keeps a snapshot transmission to a
        # follower (an open file and an offset) when this node stops leading, and a later term
        # of this node resumes it mid-file, while the follower has meanwhile begun another
        # leader's transmission: it appends the rest of this one to that file, and the snapshot
        # it loads is garbage (the CI chaos run: a joined node's install failed "not a raftsched
        # LMDB store" after leadership went n3 -> n1 -> n3 during its catch-up). A new term
        # starts every transmission afresh.
        serializer = self._SyncObj__serializer
        for node in list(self._SyncObj__otherNodes | self._SyncObj__readonlyNodes):
            serializer.cancelTransmisstion(node)
        super()._SyncObj__onBecomeLeader()

    def member_addresses(self) -> list[str]:
        """Every voter's address as this node dials it, self included (a copy; any thread)."""
        for _ in range(5):
            try:
                others = [str(n.address) for n in list(self._SyncObj__otherNodes)]
                break
            except RuntimeError:  # the set changed size while the tick thread applied a change
                continue
        else:
            others = []
        return sorted({*others, str(self._SyncObj__selfNode.address)})

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        # Overrides pysyncobj's name-mangled handler (SyncObj binds self.__onMessageReceived in
        # __init__, so this runs for every message). patches.py: rebuilt-node-votes,
        # unverified-commit, message-hooks.
        if self._raftsched_votes_after is not None and not self._raftsched_may_vote(message):
            return  # a rebuilt node's vote could elect a leader without committed entries
        message = cap_unverified_commit(message, int(self.raftCommitIndex))  # patches.py
        if isinstance(message, dict) and CLOCK_KEY in message:
            try:
                self._raftsched_clock_heard(str(node.address), str(message.get("type")), message[CLOCK_KEY])
            except Exception:  # a malformed stamp from an authenticated peer: ignore it
                log.exception("clock stamp from %s not understood", node)
        super()._SyncObj__onMessageReceived(node, message)
        # The moment a leader is heard from counts, not whether one is known when the election
        # timer next fires: a candidate's request_vote of a higher term clears pysyncobj's
        # leader before then (see PySyncObjNode.hold_elections).
        heard = isinstance(message, dict) and message.get("type") == "append_entries"
        if heard and self._getLeader() is not None:
            self._raftsched_heard_at = time.monotonic()
            self._raftsched_leader_heard()

    def contact_age(self, now: float, leading: bool) -> float | None:
        """Seconds since this node's view was confirmed (None: never; a report, not a decision).

        A leader: the age of the newest answer it holds from a majority, itself included (read
        from pysyncobj's ``__lastResponseTime``, which its own ``leaderFallbackTimeout`` check
        uses, syncobj.py:_onTick); a follower: since the leader's last ``append_entries``.
        ``now``: ``time.monotonic()``, the follower's clock; a leader's answers are timed by
        pysyncobj's own clock (:func:`_raft_clock`, which drifts from ``time.monotonic``), so
        their age is taken on that one (on ``now`` it was off by the drift, growing with
        uptime: 0.256 s too old after 18 h here, and from a drift of ``LEADER_CONTACT_MAX_MS``
        on, a healthy leader's Leader health would say NOT_SERVING; or always 0 if the drift
        goes the other way)."""
        if not leading:
            heard: float | None = self._raftsched_heard_at
            return None if heard is None else max(0.0, now - heard)
        try:
            times: list[float] = sorted(dict(self._SyncObj__lastResponseTime).values(), reverse=True)
            voters = len(self._SyncObj__otherNodes) + 1
        except (AttributeError, RuntimeError):  # not started yet, or changed under us
            return None
        need = voters // 2  # answers from others that make a majority with this node
        if need == 0:
            return 0.0
        if len(times) < need:
            return None
        return max(0.0, _raft_clock() - times[need - 1])

    def _raftsched_may_vote(self, message: Any) -> bool:
        """A rebuilt node (its journal moved aside) has forgotten the entries it acknowledged and
        the vote it cast: granting a vote now could elect a candidate that lacks committed
        entries (Raft counts on a voter's log to refuse it) or vote twice in a term. So it drops
        vote requests until it has applied the commit index of the first leader it hears from;
        False: drop ``message``."""
        target = self._raftsched_votes_after
        if target is None or not isinstance(message, dict):
            return True
        kind = message.get("type")
        if kind == "append_entries" and target == -1 and "commit_index" in message:
            target = self._raftsched_votes_after = int(message["commit_index"])
        if target >= 0 and int(self.raftLastApplied) >= target:
            self._raftsched_votes_after = None
            log.info("rebuilt node caught up with the leader's commit index %d: it votes again", target)
            return True
        return kind != "request_vote"

    def take_covered_callbacks(self, last_index: int) -> list[Callable[[object, int], None]]:
        """The callbacks of this node's proposals whose entries a snapshot being installed covers
        (tick thread), taken out of pysyncobj's ``__commandsWaitingCommit`` for the caller to
        answer (patches.py: snapshot-install-callbacks)."""
        return release_covered(self._SyncObj__commandsWaitingCommit, last_index)

    # Plain (not replicated) methods: the adapter's way to pysyncobj's underscore-named API.

    def propose_entry(self, data: bytes, callback: Callable[[object, int], None]) -> None:
        """Append ``data`` through the one replicated entry point; ``callback(result, error)``."""
        self._raftsched_apply(data, callback=callback)

    def leads(self) -> bool:
        return bool(self._isLeader())

    def leader_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else str(leader.address)

    @replicated  # type: ignore[untyped-decorator]
    def _raftsched_apply(self, data: bytes) -> int:
        # raftLastApplied + 1 is the index of the entry being applied (docs/architecture.md §10).
        # The entry is applied on the applier thread; the proposer gets its result through
        # Applier.on_result(index). Returning the index is all the tick thread does.
        index = int(self.raftLastApplied) + 1
        try:
            if isinstance(data, bytes):
                self._raftsched_enqueue(index, data)
        except Exception:  # an exception here would wedge every node of the cluster
            log.critical("replicated apply raised at index %d", index, exc_info=True)
        return index


class PySyncObjNode:
    """A :class:`raftsched.abc.ConsensusNode` over pysyncobj, with LMDB-backed snapshots.

    ``apply_fn(index, data)`` is called for each committed entry, in log order, on the applier
    thread (see :mod:`raftsched.consensus.applier`); ``on_tick`` commits the store batch, on the
    same thread; ``on_leadership`` is called on pysyncobj's tick thread on every role change.
    ``write_snapshot(file)`` must write the store image at the current applied index;
    ``load_snapshot(path, offset)`` must replace the store with the image at ``offset``.
    ``hold_until_leader``: a node joining an existing cluster, which does not campaign until a
    leader's ``append_entries`` reaches it (see :meth:`hold_elections`). ``rebuilding``: a node
    whose journal was moved aside (``raftsched-node --rebuild``); it also grants no vote until it
    has caught up with the first leader it hears from (see ``_Raft._raftsched_may_vote``).
    """

    def __init__(
        self,
        node_id: str,
        self_addr: str,
        peers: list[str],
        secret: str,
        data_dir: Path,
        tuning: RaftTuning,
        apply_fn: Callable[[int, bytes], bytes | None],
        on_tick: Callable[[], None],
        on_leadership: Callable[[Leadership], None],
        write_snapshot: Callable[[BinaryIO], None],
        load_snapshot: Callable[[Path, int], None],
        applied_index: Callable[[], int],
        addr_to_id: Callable[[str], str | None],
        on_store_failure: Callable[[BaseException], None] | None = None,
        dial_address: Callable[[str], str] | None = None,
        cluster_view: Callable[[], list[str] | None] | None = None,
        bind_addr: str | None = None,
        hold_until_leader: bool = False,
        clock_watch: ClockWatch | None = None,
        rebuilding: bool = False,
    ) -> None:
        if not secret or len(secret) < 16:
            raise ValueError("a cluster secret of at least 16 characters is required")
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "PySyncObjNode must be constructed on the main thread (pysyncobj's tick thread "
                "stops when its constructing thread exits)"
            )
        self.node_id = node_id
        self.self_addr = self_addr
        self._peers = tuple(peers)
        self._cluster_view = cluster_view or (lambda: None)
        self._holding = False  # campaigns held (see hold_elections)
        # Clocks (raftsched.clockwatch): stamped on appends and their replies; a node whose
        # clock the leader found off the majority's does not campaign (see _campaigns_held).
        self.clock_watch = clock_watch
        self._clock_held_logged = False
        self._transfer_asked = False  # step_down wants a TimeoutNow sent (on the tick thread)
        # Held until a leader has been heard from: a node joining an existing cluster (set
        # before the tick thread starts, so a leader heard at once is not missed).
        self._hold_until_leader = hold_until_leader
        self._on_leadership = on_leadership
        self._load_snapshot = load_snapshot
        self._applied_index = applied_index
        self._addr_to_id = addr_to_id
        self._last_role = -1
        self._last_tick = time.monotonic()
        self._stall_warn_s = tuning.raft_min_timeout / 2
        data_dir.mkdir(parents=True, exist_ok=True)
        self.port_guard = RaftPortGuard(node_id, addr_to_id)
        self._on_store_failure = on_store_failure
        self._failed: BaseException | None = None
        self._applier = Applier(apply_fn, on_tick, on_fatal=self._store_failed)
        snapshots = SnapshotWriter(node_id, data_dir / "raft.dump", self._applier, write_snapshot)
        self._snapshots = snapshots
        conf = SyncObjConf(
            # Listen where the config says, not on every interface (pysyncobj's default).
            bindAddress=bind_address(bind_addr or self_addr),
            appendEntriesUseBatch=True,
            appendEntriesPeriod=tuning.append_entries_period,
            autoTickPeriod=tuning.auto_tick_period,
            raftMinTimeout=tuning.raft_min_timeout,
            raftMaxTimeout=tuning.raft_max_timeout,
            connectionTimeout=tuning.connection_timeout,
            connectionRetryTime=tuning.connection_retry_time,
            leaderFallbackTimeout=tuning.leader_fallback_timeout,
            logCompactionMinEntries=tuning.log_compaction_min_entries,
            logCompactionMinTime=tuning.log_compaction_min_time,
            journalFile=str(data_dir / "raft.journal"),
            fullDumpFile=str(data_dir / "raft.dump"),
            serializer=snapshots.serialize,
            deserializer=self._deserialize,
            serializeChecker=snapshots.state,
            password=secret,
            commandsWaitLeader=False,
            dynamicMembershipChange=True,
            onStateChanged=self._state_changed,
            # A Raft port in use fails the start (waitBinded below) after three attempts half a
            # second apart, instead of pysyncobj retrying every second forever while the rest of
            # the node runs; the retries ride out a port that is only briefly taken.
            maxBindRetries=3,
            bindRetryTime=0.5,
        )
        self._applier.start()
        # The node is built whole or not at all. pysyncobj starts its tick thread inside
        # SyncObj.__init__, and that thread calls this node back at once (the campaign hold, a
        # role change, loading the snapshot file): so the node holds its SyncObj from before
        # that moment (allocated, then initialised), every hook is in place before the thread
        # starts, and a start that fails stops what it started before raising.
        self._raft: _Raft = _Raft.__new__(_Raft)
        try:
            _Raft.__init__(
                self._raft,
                self._applier.enqueue,
                self_addr,
                peers,
                conf,
                guard=self.port_guard,
                hold=self._campaigns_held,
                leader_heard=self._leader_heard,
                clock_stamp=self._clock_stamp,
                clock_heard=self._clock_heard,
                dial=dial_address,
                rebuilding=rebuilding,
            )
        except BaseException:
            self._applier.stop()
            raise
        try:
            self._raft.waitBinded()
        except SyncObjException:
            self._raft.destroy()
            self._applier.stop()
            raise CannotStart(
                f"cannot listen on the Raft address {bind_addr or self_addr}: the port is in use "
                "(or the address is not on this host)"
            ) from None
        self._raft.addOnTickCallback(self._tick)

    # -- ConsensusNode ---------------------------------------------------------------------------

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        """Propose ``data``. ``on_commit`` (optional) runs on the tick thread the moment the entry
        is committed, before it is applied; ``callback`` gets the apply result afterwards."""

        def done(result: object, err: int) -> None:
            if err == FAIL_REASON.SUCCESS and isinstance(result, int):
                if on_commit is not None:
                    try:
                        on_commit()
                    except Exception:
                        log.exception("on-commit hook failed")
                self._applier.on_result(result, lambda applied: callback(applied or b"", None))
            elif err == FAIL_REASON.SUCCESS:
                callback(b"", None)  # outcome unknown
            else:
                callback(None, propose_error(err))

        try:
            self._raft.propose_entry(data, done)
        except Exception as exc:  # e.g. the SyncObj is being destroyed
            callback(None, ProposeError("unavailable", f"raft: {exc}"))

    def propose_barrier(self, data: bytes, callback: BarrierCallback) -> None:
        """Propose ``data`` and answer ``callback(index, None)`` once it is committed, applied
        here and the store committed through it (see :class:`raftsched.abc.ConsensusNode`)."""

        def durable(index: int, ok: bool) -> None:
            if ok:
                callback(index, None)
            else:
                callback(0, ProposeError("unavailable", "the barrier was not applied on this node"))

        def done(result: object, err: int) -> None:
            if err == FAIL_REASON.SUCCESS and isinstance(result, int):
                index = result
                self._applier.on_durable(index, lambda ok: durable(index, ok))
            elif err == FAIL_REASON.SUCCESS:
                callback(0, ProposeError("unavailable", "raft: the barrier's outcome is unknown"))
            else:
                callback(0, propose_error(err))

        try:
            self._raft.propose_entry(data, done)
        except Exception as exc:  # e.g. the SyncObj is being destroyed
            callback(0, ProposeError("unavailable", f"raft: {exc}"))

    def is_leader(self) -> bool:
        return self._failed is None and self._raft.leads()

    def epoch(self) -> int:
        return int(self._raft.raftCurrentTerm)

    def leader_addr(self) -> str | None:
        return self._raft.leader_address()

    def leader_id(self) -> str | None:
        addr = self.leader_addr()
        return None if addr is None else self._addr_to_id(addr)

    def status(self) -> RaftStatus:
        """pysyncobj's ``getStatus()`` decoded; its raw keys never leave this module."""
        peers = [a for a in self._raft.member_addresses() if a != self.self_addr]
        status = decode_status(self._raft.getStatus(), peers, self.port_guard.refusal_for)
        age = self._raft.contact_age(time.monotonic(), status.role == "leader")
        return dataclasses.replace(status, contact_age_ms=-1 if age is None else int(age * 1000))

    # -- membership and leadership hand-over ---------------------------------------------------

    def member_addresses(self) -> list[str]:
        """The Raft layer's voters, as this node dials them, self included."""
        return self._raft.member_addresses()

    def change_membership(
        self, kind: str, raft_addr: str, callback: Callable[[ProposeError | None], None]
    ) -> None:
        """Append pysyncobj's own membership entry adding or removing the node whose Raft
        identity is ``raft_addr``; ``callback(None)`` once committed, else with the error.

        Leader only. pysyncobj applies the change when the entry is *appended* (single-server
        change) and refuses (``unavailable: raft: request_denied``) while a previous change or the
        leader's first entry of its term is uncommitted, or when the change changes nothing.
        """

        def done(_result: object, err: int) -> None:
            if err == FAIL_REASON.SUCCESS:
                callback(None)
            else:
                callback(propose_error(err))

        try:
            if kind == "add":
                self._raft.addNodeToCluster(raft_addr, callback=done)
            else:
                self._raft.removeNodeFromCluster(raft_addr, callback=done)
        except Exception as exc:
            callback(ProposeError("unavailable", f"raft: {exc}"))

    def hold_elections(self, held: bool = True, until_leader: bool = False) -> None:
        """Stop (or resume) campaigning. ``until_leader``: hold only until a leader is heard
        from (a node joining an existing cluster); from the first ``append_entries`` of a
        leader on, this node campaigns like any member.

        That moment has to be caught when it happens. Checking "is a leader known?" only when
        the election timer fires (as this did first) misses it when the leader dies and another
        follower's ``request_vote`` of a higher term arrives first: pysyncobj then forgets the
        leader, the check finds none, and the hold never ends. If that follower's log is
        shorter than this node's, this node refuses it its vote and never campaigns itself, and
        the cluster has no leader at all (the CI chaos run: a replacement node, then a leader
        SIGKILL just after the other follower restarted)."""
        self._holding = held and not until_leader
        self._hold_until_leader = held and until_leader

    def _leader_heard(self) -> None:
        """Tick thread: an ``append_entries`` from a leader was just handled."""
        if self._hold_until_leader:
            self._hold_until_leader = False
            log.info("%s: heard from the leader; campaigns are no longer held", self.node_id)

    def _campaigns_held(self) -> bool:
        if self._hold_until_leader and self._raft._getLeader() is not None:
            self._leader_heard()
        return self._holding or self._hold_until_leader or self._clock_holds()

    def _clock_holds(self) -> bool:
        """This node's clock is off the majority's by more than max_clock_skew (the leader said
        so, or its own clock stepped since): leading with it would stamp a time the others do
        not share, so it does not campaign. It still votes (Raft's safety needs no clock)."""
        w = self.clock_watch
        faulty = w is not None and w.view(leading=False).faulty
        if faulty != self._clock_held_logged:
            self._clock_held_logged = faulty
            if faulty:
                log.warning(
                    "%s: this node's clock is off the majority's by more than max_clock_skew; it "
                    "does not campaign until it agrees again",
                    self.node_id,
                )
            else:
                log.info("%s: its clock agrees with the majority again; it may campaign", self.node_id)
        return faulty

    def _clock_stamp(self, peer: str, kind: str) -> tuple[Any, ...] | None:
        """Tick thread: the stamp on a message to ``peer`` (see GuardedTransport.send)."""
        w = self.clock_watch
        if w is None:
            return None
        if kind == "append_entries":  # we lead: our clock, and what we measured of theirs
            offset, skew = w.advice_for(peer)
            return ("a", w.wall_ms(), round(w.mono_s() * 1_000_000), offset, skew)
        echo = w.echo_for(peer)  # a reply: our clock, and the leader's stamp it answers
        return None if echo is None else ("r", w.wall_ms(), echo)

    def _clock_heard(self, peer: str, kind: str, stamp: Any) -> None:
        """Tick thread: a stamp from ``peer`` (checked: it comes over the network)."""
        w = self.clock_watch
        if w is None or not isinstance(stamp, tuple) or not stamp:
            return
        if stamp[0] == "a" and kind == "append_entries" and len(stamp) == 5:
            _, _wall, mono_us, offset, skew = stamp
            if isinstance(mono_us, int):
                w.leader_stamp(peer, mono_us)
            if isinstance(offset, int) and (skew is None or isinstance(skew, int)):
                w.told(offset, skew)
        elif stamp[0] == "r" and kind == "next_node_idx" and len(stamp) == 3:
            _, wall, echo = stamp
            if isinstance(wall, int) and isinstance(echo, int):
                w.round_trip(peer, wall, echo)

    def step_down(self, timeout_s: float) -> str | None:
        """Hand leadership to the most caught-up connected follower (Raft TimeoutNow) and stop
        campaigning. Returns the new leader's address, or None if this node did not lead or no
        follower took over within ``timeout_s`` (then the followers' election timeout elects one,
        because this node no longer campaigns; its leadership lapses after
        ``leader_fallback_timeout`` at the latest).

        Blocks the calling thread (polls); never call it on the tick thread."""
        was_leader = self._raft.leads()
        self.hold_elections(True)
        if not was_leader:
            return None
        return self.hand_over(timeout_s)

    def hand_over(self, timeout_s: float) -> str | None:
        """Hand leadership to the most caught-up connected follower (Raft TimeoutNow) without
        holding campaigns for good (a leader whose clock is off: it campaigns again once its
        clock agrees). Returns the new leader's address, or None (see :meth:`step_down`).

        Blocks the calling thread (polls); never call it on the tick thread."""
        if not self._raft.leads():
            return None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(p.connected for p in self.status().peers):
                return None  # nobody to hand over to (a one-node cluster, or the peers are down)
            if self._raft.leads():
                # Sent by the tick thread (pysyncobj's transport is not thread-safe); denied
                # while no follower has everything, so asked again until one has caught up.
                self._transfer_asked = True
            else:
                leader = self._raft.leader_address()
                if leader is not None and leader != self.self_addr:
                    return leader
            time.sleep(0.01)
        return None

    def destroy(self) -> None:
        if self._failed is not None:
            self._raft.destroy()  # already leaving (a store failure); the tick thread ends itself
            self._applier.stop()
            return
        self._raft.destroy_synchronous()
        self._snapshots.join()
        self._applier.stop()

    # -- a store that cannot take writes ---------------------------------------------------------

    def _store_failed(self, exc: BaseException) -> None:
        """The applier stopped on a store failure (applier thread): leave the cluster at once.

        A node that cannot apply must not lead, nor vote or acknowledge entries it will not
        apply: it reports itself not leading, then the SyncObj is destroyed (the tick thread
        closes every connection and the journal, and ends), so the peers elect a healthy
        leader. Entries committed but not applied here stay in the journal and in the peers'
        logs; a restart replays them. ``on_store_failure`` then tells the node.
        """
        self._failed = exc
        term = int(self._raft.raftCurrentTerm)
        try:
            self._on_leadership(Leadership(False, term, None))
        except Exception:
            log.exception("leadership hook failed")
        self._raft.destroy()
        if self._on_store_failure is not None:
            self._on_store_failure(exc)

    # -- callbacks on the tick thread ----------------------------------------------------------

    def _tick(self) -> None:
        if self._transfer_asked:
            self._transfer_asked = False
            if self._raft.leads():
                self._raft.transferLeadership(callback=lambda _r, _e: None)
        now = time.monotonic()
        gap, self._last_tick = now - self._last_tick, now
        # A tick thread that stalls longer than the election timeout costs the cluster a leader.
        if gap > self._stall_warn_s:
            log.warning("%s: raft tick thread stalled for %.0f ms", self.node_id, gap * 1000)

    def _state_changed(self, old: int, new: int) -> None:
        if new == self._last_role or self._failed is not None:
            return
        self._last_role = new
        term = int(self._raft.raftCurrentTerm)
        log.info(
            "%s: raft role %s -> %s (term %d)",
            self.node_id,
            RAFT_STATES.get(old, old),
            RAFT_STATES.get(new, new),
            term,
            extra=leadership_fields(term, node=self.node_id),
        )
        try:
            self._on_leadership(Leadership(new == LEADER, term, self.leader_id()))
        except Exception:
            log.exception("leadership hook failed")

    # -- snapshot install (the file format and the writer: snapshot.py) --------------------------

    def _release_covered_proposals(self, last_index: int) -> int:
        """Answer this node's proposals whose log entries an installed snapshot covers (tick
        thread), with outcome unknown; returns how many.

        pysyncobj keeps a proposal's callback until it applies that log index itself
        (``commandsWaitingCommit``), and a snapshot install skips the applying: the callback
        is never called. A leader deposed with fire batches in flight that then catches up by a
        snapshot kept them in flight for good; when it led again its driver, its pipeline full,
        never proposed another fire (the chaos soak: a new leader elected, heartbeats fine,
        nothing fired for 60 s). An unknown outcome is what it is: the entry may be in the
        snapshot or may have been replaced; a proposer re-plans or retries, and the state
        machine refuses what was already applied."""
        callbacks = self._raft.take_covered_callbacks(last_index)
        for callback in callbacks:
            try:
                callback(None, FAIL_REASON.UNKNOWN_OUTCOME)
            except Exception:
                log.exception("%s: a proposal's callback failed", self.node_id)
        return len(callbacks)

    def _deserialize(self, path: str) -> tuple[Any, Any, Any]:
        """pysyncobj's deserializer (tick thread): installs the snapshot at ``path`` when the
        store is behind it; returns pysyncobj's ``(last, prev, cluster)``."""
        last, prev, _writer_cluster, offset = read_header(path)
        if self._applied_index() < last[1]:
            # Our store is behind the snapshot (new or wiped node, or a follower that fell behind
            # the leader's compacted log): install the leader's copy. A copy of our own still
            # being written must finish first (it pauses the applier) and must not replace it.
            started = time.monotonic()
            self._snapshots.supersede()
            self._applier.quiesce()
            try:
                self._load_snapshot(Path(path), offset)
            except SnapshotFormatError as exc:
                # A newer leader's state this build cannot read: nothing was installed; stop
                # like a store failure (leave the cluster) instead of running on stale state.
                self._applier.halt(FormatTooNew(int(last[1]), exc))
                raise
            self._applier.reset(last[1])
            log.info(
                "%s: installed snapshot at index %d in %.0f ms",
                self.node_id,
                last[1],
                (time.monotonic() - started) * 1000,
            )
        # pysyncobj moves its applied index to the snapshot's: whatever of this node's proposals
        # it covers is never applied through pysyncobj, so their callbacks must be answered here.
        released = self._release_covered_proposals(int(last[1]))
        if released:
            log.info(
                "%s: %d proposal(s) of this node covered by the snapshot at index %d: outcome unknown",
                self.node_id,
                released,
                last[1],
            )
        # pysyncobj adopts the returned cluster (dynamic membership). The header holds the
        # membership as the *writer* dialled it (its raft_via proxies), so the replicated
        # membership just installed, as this node dials it, replaces it; before the membership
        # is recorded, the Raft layer's current view stays.
        view = self._cluster_view()
        if view is None:
            view = self._raft.member_addresses()
        cluster = {TCPNode(a) for a in {*view, self.self_addr}}
        return last, prev, cluster
