"""The wiring of one node's replicated core, shared by the real node and the simulation.

:class:`Core` builds, for one node, the parts that follow the log and decide what a leader
does, and connects them the one way both :class:`raftsched.server.node.Node` and
:class:`raftsched.testing.SimHarness` run them: the state machine (given, loaded by the
caller), the clock watch, the leader driver, the dispatcher, the leader gate and the applier
(:class:`raftsched.replica.Replica`) with its effect sink. A guard that exists in one wiring and
not the other is a bug the simulation cannot find; so the guards live here.

What stays outside: threads, the consensus node, IO and the network. The caller decides how
effects reach the driver and the dispatcher (:attr:`Core.to_driver`, :attr:`Core.to_dispatcher`:
directly in the simulation, through the driver thread and the event loop in a node); either
way the dispatcher takes leadership through :meth:`Core.dispatch_effects` or the executor
service, both by :meth:`raftsched.leader.gate.LeaderGate.takes_dispatch`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from raftsched.abc import Clock, ConsensusNode, StateStore
from raftsched.clockwatch import ClockWatch
from raftsched.fsm.effects import Effect
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.driver import LeaderDriver
from raftsched.leader.formats import PROMOTE_FORMAT, MemberFormats
from raftsched.leader.gate import LeaderGate
from raftsched.replica import Replica
from raftsched.timing.schedule import MisfireSettings

EffectsFn = Callable[[tuple[Effect, ...]], None]


def _never() -> bool:
    return False


class Core:
    """One node's state machine, driver, dispatcher, gate and applier, wired.

    Construction only connects objects: no thread starts and nothing is proposed. Every hook
    the driver consults (the dispatcher's overlap hold, the clock watch, the damage check) is
    attached here, before the caller can start anything that runs the driver.
    """

    def __init__(
        self,
        node_id: str,
        store: StateStore,
        state: SchedulerState,
        *,
        clock: Clock,
        consensus: Callable[[], ConsensusNode | None],
        dispatch: DispatchSettings,
        rng: random.Random,
        misfire: MisfireSettings,
        max_skew_ms: int,
        members: Callable[[], int],
        max_fires_per_batch: int = 1000,
        max_dispatch_backlog: int = 0,
        leader_address: Callable[[], str | None] = lambda: None,
        damaged: Callable[[], str] = lambda: "",
        content_sum: Callable[[], int] | None = None,
        member_formats: MemberFormats | None = None,
    ) -> None:
        self.node_id = node_id
        self.store = store
        self.state = state
        # This node's view of the others' clocks (raftsched.clockwatch): a leader whose clock is
        # off the majority's plans and stamps nothing.
        self.clock_watch = ClockWatch(clock.now_ms, clock.monotonic, max_skew_ms, members=members)
        self.driver = LeaderDriver(
            state,
            node_id,
            misfire,
            max_fires_per_batch,
            max_skew_ms=max_skew_ms,
            max_dispatch_backlog=max_dispatch_backlog,
        )
        # Jitter randomness enters with ``rng``, at the edge; what it decides is written into the log.
        self.dispatcher = Dispatcher(state, dispatch, rng)
        self.driver.hold_fires = self.dispatcher.overlap_unknown
        dispatcher = self.dispatcher
        self.driver.dispatch_backlog = lambda: dispatcher.backlog  # any thread may ask (one len)
        self.driver.dispatch_waiting = dispatcher.waiting_tasks
        self.driver.clock_faulty = self.clock_watch.faulty
        self.driver.damaged = lambda: bool(damaged())
        # The columnar hot-path bodies only while every voting member applies them
        # (raftsched.leader.formats); without a poller of the members' formats, never.
        self.member_formats = member_formats
        columns = member_formats.all_apply if member_formats is not None else _never
        self.driver.columns_allowed = columns
        if member_formats is not None:  # PromoteHotRuns, once every voting member applies it
            self.driver.promote_allowed = lambda: member_formats.all_apply(PROMOTE_FORMAT)
        self.dispatcher.columns_allowed = columns
        self.gate = LeaderGate(
            node_id,
            clock,
            state,
            self.driver,
            consensus=consensus,
            leader_address=leader_address,
            clock_faulty=self.clock_watch.faulty,
            damaged=damaged,
        )
        # Where the applier's effects go (see the module docstring); None drops them.
        self.to_driver: EffectsFn | None = self.driver.on_effects
        self.to_dispatcher: EffectsFn | None = None
        # Leader effects from this node's own barrier on (decided by the replica, see there).
        self.replica = Replica(
            state, store, effect_sink=self._effects, node_id=node_id, content_sum=content_sum
        )

    def _effects(self, effects: tuple[Effect, ...]) -> None:
        if self.to_driver is not None:
            self.to_driver(effects)
        if self.to_dispatcher is not None:
            self.to_dispatcher(effects)

    def dispatch_effects(self, effects: tuple[Effect, ...], now_ms: int) -> None:
        """Hand applied effects to the dispatcher, on the one thread that touches it: it takes
        dispatch leadership at this node's barrier of the term its driver leads (never at one
        replayed from an older term), then follows the effects."""
        d = self.dispatcher
        for effect in effects:
            if self.gate.takes_dispatch(effect):
                d.become_leader(effect.epoch, now_ms)
        d.on_effects(effects, now_ms)
