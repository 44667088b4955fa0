"""The seams of raftsched, in one file so a reader learns the architecture here.

Each seam has an in-memory implementation shipped in the package (for simulation and for users'
own tests) and a real one:

=================  ==================================  ==========================================
seam               in memory                           real
=================  ==================================  ==========================================
StateStore         storage.memory.MemoryStore          storage.lmdb_store.LmdbStore
Clock              timing.clock.ManualClock            timing.clock.SystemClock
ConsensusNode      consensus.memory.SimNode            consensus.pysyncobj.node.PySyncObjNode
ExecutionLog       storage.memory.MemoryExecutionLog   storage.lmdb_execlog.LmdbExecutionLog
ExecutorTransport  executor.memory.MemoryTransport     rpc.executor_client.GrpcExecutorTransport
=================  ==================================  ==========================================
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from raftsched.v1 import raftsched_pb2 as pb


class StateStore(Protocol):
    """Durable key/value image of the replicated state, written only by ``apply``.

    Writes (``put``/``delete``) go into the current batch and are visible to ``get``/``scan`` on the
    applying thread at once; ``commit`` makes the batch durable together with the Raft index it
    covers, atomically. Readers on other threads use ``reader()``, which sees committed data only.
    Keys starting with ``b"~"`` are node-local (the applied index) and are not replicated state.
    """

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def scan(
        self, start: bytes, end: bytes, *, reverse: bool = False, limit: int = 0
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs with ``start <= key < end`` in key order (reversed if asked), at most ``limit`` (0 = all)."""
        ...

    def scan_keys(self, start: bytes, end: bytes, *, limit: int) -> list[bytes]:
        """The keys with ``start <= key < end`` in key order, at most ``limit`` (>= 1), without
        their values (a pruning pass that decides by key reads no value). Sees the open batch;
        the list is taken at the call, so the caller may delete what it names."""
        ...

    def commit(self, applied_index: int) -> None:
        """Make every write since the last commit durable, with ``applied_index``, in one transaction."""
        ...

    def applied_index(self) -> int: ...

    def reader(self) -> StoreReader: ...

    def replace_all(self, entries: Iterator[tuple[bytes, bytes]], applied_index: int) -> None:
        """Discard every key and load ``entries`` (a snapshot install), durably, in one transaction."""
        ...

    def failure(self) -> BaseException | None:
        """The first storage error of the write path (store full, disk full, I/O error), or None.

        Once set, writes since the last commit may be lost: the node must stop applying."""
        ...


class ApplyHalted(Exception):
    """This node cannot apply log entry ``index``; it must stop applying and leave the cluster.

    The entry stays in the Raft log (nothing of it was applied), so once the cause is fixed a
    restart replays it. Subclasses say why: :class:`StoreFailed`, :class:`FormatTooNew`.
    """

    def __init__(self, index: int, cause: BaseException) -> None:
        self.index = index
        self.cause = cause
        super().__init__(f"applying stopped at log index {index}: {cause!r}")


class FormatTooNew(ApplyHalted):
    """Entry ``index`` (or an installed snapshot) was written by a newer raftsched build, in a
    format this build cannot apply. Recording a rejection instead would make this replica differ
    from the upgraded ones, so it stops: upgrade raftsched on this node and restart it."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(index, cause)
        self.args = (f"log index {index}: {cause}",)


class StoreFailed(ApplyHalted):
    """The store cannot take writes (full map, full disk, I/O error): applying cannot go on here.

    ``index`` is the log entry whose apply or commit found it; everything before the store's
    last committed index is safe, and the Raft log still holds the rest.
    """

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(index, cause)
        self.args = (f"store failed at log index {index}: {cause!r}",)


class StoreReader(Protocol):
    """A consistent, read-only view of committed data. Use as a context manager; keep it short."""

    def __enter__(self) -> StoreReader: ...

    def __exit__(self, *exc: object) -> None: ...

    def get(self, key: bytes) -> bytes | None: ...

    def scan(
        self, start: bytes, end: bytes, *, reverse: bool = False, limit: int = 0
    ) -> Iterator[tuple[bytes, bytes]]: ...

    def applied_index(self) -> int:
        """The applied log index the view's data covers (committed with it)."""
        ...


class Clock(Protocol):
    """The only way raftsched code learns the time. ``now_ms`` is UTC epoch milliseconds."""

    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Leadership:
    """A leadership change as the consensus layer reports it. ``epoch`` is the Raft term."""

    is_leader: bool
    epoch: int
    leader_id: str | None


class ProposeError(Exception):
    """A proposal did not commit, or its outcome is unknown (``code``: not_leader, unavailable...).

    A command that failed this way *may* still have been applied; client commands carry an
    idempotency key, so retrying is safe.
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


# callback(result_bytes, None) after the command is committed and applied on this node;
# callback(None, error) otherwise. Runs on the consensus thread: it must be quick and not block.
ProposeCallback = Callable[[bytes | None, ProposeError | None], None]

# Runs on the consensus thread the moment a proposed entry is committed, before it is applied
# (the leader driver frees a pipeline slot and records commit lateness there). Quick, no blocking.
CommitHook = Callable[[], None]

# callback(index, None) once a barrier entry is committed at log ``index``, applied on this node
# and its store committed through it, so that every read of this node's state or store sees at
# least everything committed up to ``index``; callback(0, error) if it did not commit here or its
# outcome is unknown. Runs on a consensus thread: quick, no blocking.
BarrierCallback = Callable[[int, ProposeError | None], None]

ROLES = ("follower", "candidate", "leader")


@dataclass(frozen=True, slots=True)
class PeerStatus:
    """What this node knows of one peer. ``address`` is the peer as this node dials it."""

    address: str
    connected: bool
    match_index: int  # the peer's log position as the leader knows it; -1 when not leading
    refused: str = ""  # why the link was refused lately (a wrong secret...); "" if it was not


@dataclass(frozen=True, slots=True)
class RaftStatus:
    """A typed snapshot of the consensus layer's view, for status reports (never for decisions).

    ``role`` is one of :data:`ROLES`; ``peers`` lists every configured peer, in configuration order.
    """

    role: str = "follower"
    term: int = 0
    commit_index: int = 0
    log_len: int = 0
    peers: tuple[PeerStatus, ...] = ()
    # How long ago this node's view was last confirmed, ms; -1 unknown. A leader: the age of the
    # newest answer it holds from a majority (itself included); a follower: since the leader's
    # last append reached it. A report only: reads are made linearizable by a barrier, not by this.
    contact_age_ms: int = -1

    def peer(self, address: str) -> PeerStatus:
        """The peer known by ``address``; unknown ones read as disconnected, match index -1."""
        for p in self.peers:
            if p.address == address:
                return p
        return PeerStatus(address, False, -1)


class ConsensusNode(Protocol):
    """A replicated log feeding one apply function: exactly what the rest of raftsched calls.

    ``propose`` never blocks. The apply function registered at construction is called on exactly
    one thread, in log order, once per committed entry, on every node. ``epoch`` is the Raft term
    this node is in; ``leader_id`` the node id of the leader it follows (None while unknown).
    ``destroy`` leaves the cluster for good: pending proposals fail, nothing is applied after it.
    """

    @property
    def node_id(self) -> str: ...

    def propose(
        self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None
    ) -> None: ...

    def propose_barrier(self, data: bytes, callback: BarrierCallback) -> None:
        """Propose ``data`` (a command that changes nothing: a read barrier) like ``propose``,
        and tell ``callback`` the log index it committed at once it is applied here *and* the
        store is committed through it (see :data:`BarrierCallback`). Never blocks."""
        ...

    def is_leader(self) -> bool: ...

    def epoch(self) -> int: ...

    def leader_id(self) -> str | None: ...

    def status(self) -> RaftStatus: ...

    def destroy(self) -> None: ...


class ExecutionLog(Protocol):
    """An executor's durable record of the execution ids it has begun: ``str`` key → opaque value.

    Every key also has an *insertion sequence*, fixed when it is first inserted, and a *settled*
    flag, False when inserted. Lists come back in insertion order. Each call is atomic and
    durable when it returns (to the implementation's durability: fsynced, or only committed
    until ``flush``). Keys are 1 to 511 UTF-8 bytes; any other raises ``ValueError`` and changes
    nothing. Thread-safe; one process owns a log. The executor's dedupe rules
    (:class:`raftsched.executor.dedupe.DedupeLog`) are built on this; it only stores bytes.
    """

    def get(self, key: str) -> tuple[bytes, bool] | None:
        """``(value, settled)`` for ``key``, or None if absent."""
        ...

    def insert_many(self, items: list[tuple[str, bytes]]) -> list[tuple[bytes, bool] | None]:
        """Insert each absent key, unsettled, and answer None for it; for a present key change
        nothing and answer its ``(value, settled)``. In order, in one transaction: a key repeated
        in ``items`` is inserted by its first occurrence, and of two racing inserts of one key
        exactly one answers None."""
        ...

    def update(self, items: list[tuple[str, bytes, bool]], at_ms: int = 0) -> None:
        """Overwrite value and settled flag of existing keys, keeping their insertion sequence,
        in one transaction; a key that becomes settled is settled at ``at_ms``. A missing key
        raises ``KeyError`` and changes nothing."""
        ...

    def settle(self, keys: list[str], at_ms: int = 0) -> None:
        """Mark existing keys settled at ``at_ms`` (ms since the epoch), keeping their values and
        insertion sequence, in one transaction (an acknowledgement: nothing is re-encoded or
        rewritten). A key settled already keeps its first settle time. A missing key raises
        ``KeyError`` and changes nothing."""
        ...

    def unsettled(self) -> list[tuple[str, bytes]]:
        """Every unsettled ``(key, value)``."""
        ...

    def items(self) -> list[tuple[str, bytes, bool]]:
        """Every ``(key, value, settled)``, in insertion order (read once, when a log is opened:
        batch records name their execution ids in their values, so the dedupe index is rebuilt
        from them)."""
        ...

    def prune_settled_before(self, cutoff_ms: int, limit: int) -> list[str]:
        """Delete up to ``limit`` (>= 1) keys settled at or before ``cutoff_ms``, longest-settled
        first (then in insertion order), in one transaction; return them. Unsettled keys are
        never deleted."""
        ...

    def sizes(self) -> tuple[int, int]:
        """``(keys, bytes)``: how many keys the log holds and the bytes they occupy now."""
        ...

    def __len__(self) -> int:
        """How many keys the log holds."""
        ...

    def flush(self) -> None:
        """Make every committed call durable against power loss (a no-op where there is no disk)."""
        ...

    def close(self) -> None:
        """Release the log (idempotent); later calls raise :class:`RuntimeError`."""
        ...


class TransportError(Exception):
    """An executor's call to a scheduler node failed; the executor finds the leader again.

    ``code`` is the failure in lower case (``unavailable``, ``deadline_exceeded``,
    ``failed_precondition``, ``invalid_argument``...); ``leader`` is the leader's address when
    the node answered that it does not lead and knows who does ("" otherwise). A call that failed
    this way may still have taken effect (a report may have committed): every executor call is
    safe to repeat.
    """

    def __init__(self, code: str, details: str = "", leader: str = "") -> None:
        self.code = code
        self.details = details
        self.leader = leader
        super().__init__(f"{code.upper()}: {details}")


class DispatchStream(Protocol):
    """The work a leader pushes to one executor, as batches of work items in dispatch order.

    Iterating ends when the node closes the stream (it stopped leading) and raises
    :class:`TransportError` if the connection fails. ``cancel`` hangs up (idempotent).
    """

    def __aiter__(self) -> AsyncIterator[Sequence[pb.WorkItem]]: ...

    def cancel(self) -> None: ...


@runtime_checkable
class LogUploader(Protocol):
    """An :class:`ExecutorTransport` that can also answer a leader's log request (issue 29):
    ``send_logs`` dials the target and streams ``parts`` (a header, data, an end) over the
    executor's own outbound connection; it returns when the node has taken them all or hung up
    (the reader went away), and fails with :class:`TransportError`. An executor whose transport
    is not one does not offer full logs (the reader gets the stored tail)."""

    async def send_logs(self, target: str, parts: AsyncIterator[pb.LogUpload]) -> None: ...


class SessionStream(Protocol):
    """One open ``Session`` stream (issue 31 P2): ``send`` a message up (in order; several
    tasks may send at once, and the stream writes them one at a time in the order they called),
    iterate the messages down. Iterating ends when the node closes the stream and raises
    :class:`TransportError` if the call fails (``unimplemented``: a node older than sessions).
    ``cancel`` hangs up (idempotent)."""

    async def send(self, message: pb.SessionUp) -> None: ...

    def __aiter__(self) -> AsyncIterator[pb.SessionDown]: ...

    def cancel(self) -> None: ...


@runtime_checkable
class SessionTransport(Protocol):
    """An :class:`ExecutorTransport` that can open a ``Session`` stream (the gRPC one). An
    executor whose transport is not one keeps DispatchBatch, Report and Heartbeat."""

    def session(self, target: str) -> SessionStream: ...


class ExecutorTransport(Protocol):
    """How an executor reaches the scheduler nodes: the executor RPCs, addressed to a target.

    ``target`` is a node's ``host:port``. Every method is a coroutine on the executor's event
    loop (``dispatch`` opens the stream without waiting), fails with :class:`TransportError`
    (``timeout_s`` bounds the wait), and may be retried. ``close`` releases connections; the
    transport may be used again afterwards and reconnects lazily.
    """

    async def register(
        self, target: str, request: pb.RegisterRequest, *, timeout_s: float
    ) -> pb.RegisterReply: ...

    def dispatch(self, target: str, request: pb.DispatchRequest) -> DispatchStream: ...

    async def heartbeat(
        self, target: str, request: pb.HeartbeatRequest, *, timeout_s: float
    ) -> pb.HeartbeatReply: ...

    async def report(self, target: str, request: pb.ReportRequest, *, timeout_s: float) -> pb.ReportReply: ...

    async def drain(self, target: str, request: pb.DrainRequest, *, timeout_s: float) -> pb.DrainReply:
        """Ask the leader to place no new attempts on this executor (it is shutting down)."""
        ...

    async def leave(self, target: str, request: pb.LeaveRequest, *, timeout_s: float) -> pb.LeaveReply:
        """Leave the membership: attempts still assigned to it are lost (retried by policy)."""
        ...

    async def close(self) -> None: ...
