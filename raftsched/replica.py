"""Glue between a consensus log and the state machine on one node, shared by the real node and
the simulation: the applied-index guard, one store commit per consensus tick, and routing of
effects to the leader driver.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

from raftsched import codec
from raftsched.abc import FormatTooNew, StateStore, StoreFailed
from raftsched.errors import SnapshotFormatError
from raftsched.fsm.effects import BarrierCommitted, Effect
from raftsched.fsm.state import SchedulerState

log = logging.getLogger(__name__)

EffectSink = Callable[[tuple[Effect, ...]], None]


class Replica:
    """Applies committed entries to the FSM exactly once per node, even across restarts.

    The store records the highest applied log index in the same transaction as the data it
    covers; after a restart the consensus layer replays entries the store already contains, and
    :meth:`apply_entry` skips every entry at or below that index (returning ``None``).

    Leader effects (``SchedulerState.apply(leader_effects=...)``) are decided here, on the
    applier thread, from the log itself: on from the entry after this node's own barrier
    (``node_id``) up to the next barrier of another node. A new leader's driver and dispatcher
    rebuild from the state when their barrier applies, so they need the effects of every entry
    after it and of none before; a deposed leader builds effects until its successor's barrier
    applies, which its driver and dispatcher (no longer leading) ignore. Without ``node_id``
    every entry builds them (tests, tools).
    """

    def __init__(
        self,
        state: SchedulerState,
        store: StateStore,
        effect_sink: EffectSink | None = None,
        node_id: str | None = None,
        content_sum: Callable[[], int] | None = None,
    ) -> None:
        self.state = state
        self.store = store
        self.effect_sink = effect_sink
        self.node_id = node_id
        self.leads = node_id is None  # the newest barrier applied here is this node's
        # The store's checksum of the replicated content (LmdbStore.content_sum), recorded per
        # entry next to the chain, so replicas can compare their content at one index too.
        self._content_sum = content_sum
        self.recent_sums: OrderedDict[int, int] = OrderedDict()
        self.last_applied = store.applied_index()
        self._dirty = False
        self.entries_applied = 0
        self.entries_skipped = 0
        # index -> apply-chain hash for recent entries: lets replicas be compared at one index
        # while the cluster keeps applying (node-local, bounded).
        self.recent_chains: OrderedDict[int, bytes] = OrderedDict()
        self.recent_chains_max = 100_000
        self.recent_chains[self.last_applied] = state.chain  # the chain is stored with the state
        if content_sum is not None:
            self.recent_sums[self.last_applied] = content_sum()

    def apply_entry(self, index: int, data: bytes) -> bytes | None:
        """Apply log entry ``index``.

        Raises only :class:`raftsched.abc.StoreFailed`, when the store cannot take the entry's
        writes: this node's state is then ahead of its store and it must stop applying (the
        entry stays in the Raft log, and a restart replays it), and
        :class:`raftsched.abc.FormatTooNew`, when the entry is of a newer command format than
        this build applies (nothing of it was applied; a newer build replays it). Anything else
        is logged.
        """
        if index <= self.last_applied:
            self.entries_skipped += 1
            return None
        failure = self.store.failure()
        if failure is not None:
            raise StoreFailed(index, failure)
        try:
            applied = self.state.apply(data, leader_effects=self.leads)
            result = applied.encode()
        except Exception as exc:  # SchedulerState.apply does not raise; this is belt and braces
            failure = self.store.failure()
            if failure is not None:
                raise StoreFailed(index, failure) from exc
            log.critical("apply of entry %d raised", index, exc_info=True)
            return None
        failure = self.store.failure()
        if failure is not None:
            raise StoreFailed(index, failure)
        if not applied.result.ok and applied.result.code == codec.FORMAT_TOO_NEW:
            raise FormatTooNew(index, SnapshotFormatError(applied.result.message))
        self.last_applied = index
        self._dirty = True
        self.entries_applied += 1
        if self.node_id is not None:
            for effect in applied.effects:
                if isinstance(effect, BarrierCommitted):
                    self.leads = effect.node_id == self.node_id
        self.recent_chains[index] = self.state.chain
        if len(self.recent_chains) > self.recent_chains_max:
            self.recent_chains.popitem(last=False)
        if self._content_sum is not None:
            self.recent_sums[index] = self._content_sum()
            if len(self.recent_sums) > self.recent_chains_max:
                self.recent_sums.popitem(last=False)
        if applied.effects and self.effect_sink is not None:
            try:
                self.effect_sink(applied.effects)
            except Exception:
                log.exception("effect sink failed for entry %d", index)
        return result

    def end_of_tick(self) -> None:
        """Commit everything applied in this tick, with the applied index, in one transaction.

        Raises :class:`raftsched.abc.StoreFailed` if the commit fails."""
        if self._dirty:
            try:
                self.store.commit(self.last_applied)
            except Exception as exc:
                raise StoreFailed(self.last_applied, exc) from exc
            self._dirty = False
            self.state.committed()

    def reset_from_store(self) -> None:
        """The store was replaced (snapshot install): reload the FSM and the applied index."""
        self.state.reload()
        self.last_applied = self.store.applied_index()
        self.leads = self.node_id is None  # a node catching up by a snapshot does not lead
        self._dirty = False
        self.recent_chains.clear()
        self.recent_chains[self.last_applied] = self.state.chain
        self.recent_sums.clear()
        if self._content_sum is not None:
            self.recent_sums[self.last_applied] = self._content_sum()
