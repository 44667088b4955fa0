"""Whole-cluster scenarios on a manual clock (docs/architecture.md §8, ring 3).

Each scenario is a script for :mod:`tests.sim.scenario`; read it as a specification. Times in
checks are offsets from the scenario start T0 (a whole minute). The default misfire grace is 5 s.
"""

from __future__ import annotations

import pytest

from tests.sim.scenario import T0, ScenarioError, random_fault_script, run_scenario

# --------------------------------------------------------------------------- leader failover

LEADER_CRASH_WITHIN_GRACE = """
cluster n1 n2 n3
elect n1
task t cron "* * * * * *" overlap=allow
run 10s
crash n1            # the leader dies right after accounting +10s
run 3s              # +11s, +12s, +13s fall due with nobody leading
elect n2
run 10s
check outcome t +10s fired
check outcome t +11s fired      # 3 s late: inside the grace, so it still runs
check outcome t +13s fired
check count t fired 23
check count t coalesced 0
check exactly-once t
check never-early
check no-stale-epoch-runs
check replicas-agree
"""

LEADER_CRASH_BEYOND_GRACE = """
cluster n1 n2 n3
elect n1
task m cron "* * * * *" overlap=allow       # every minute: +60s, +120s, ...
task s cron "* * * * * *" overlap=allow     # every second
run 70s
crash n1
run 4m              # +120s .. +300s fall due while nobody leads
elect n2            # at +310s: every missed minute fire is more than the grace late
run 1s
check outcome m +60s fired
check outcome m +120s coalesced
check outcome m +240s coalesced
check outcome m +300s fired     # misfire=latest: the newest missed fire runs once
check count m coalesced 3
check count m fired 2
check exactly-once m
# the per-second task has fires inside the grace: those run, every older one is coalesced
check outcome s +305s coalesced
check outcome s +306s fired
check count s coalesced 235
check exactly-once s
check never-early
check replicas-agree
"""

MISFIRE_ALL_AND_SKIP_OVER_LONG_OUTAGE = """
cluster n1 n2 n3
elect n1
task all every 10s misfire=all cap=5 window=2m overlap=allow   # fires at +10s, +20s, ...
task skip every 10s misfire=skip overlap=allow
run 15s
crash n1
run 5m
elect n3            # at +315s: +20s .. +310s (30 fires) are all missed
run 1s
check outcome all +10s fired
check outcome all +190s skipped_misfire     # older than the 2 min window
check outcome all +260s skipped_misfire     # in the window, beyond the cap of 5
check outcome all +270s fired               # the newest 5 missed fires run late
check outcome all +310s fired
check count all fired 6
check count all skipped_misfire 25
check exactly-once all
check outcome skip +10s fired
check outcome skip +310s skipped_misfire
check count skip skipped_misfire 30
check count skip fired 1
check exactly-once skip
check replicas-agree
"""

DEPOSED_LEADER_IS_FENCED = """
cluster n1 n2 n3
elect n1
task t cron "* * * * * *" overlap=allow
task u every 2s overlap=allow
task hand manual
run 5s
partition n1        # n1 is cut off but still believes it leads (leaderFallbackTimeout)
elect n2            # n2 and n3 are a majority: term 2
run 5s              # n1 keeps proposing; nothing it sends can commit
heal                # n1 is reachable again and STILL believes it leads
run 5s              # its batches are forwarded and committed under term 2 ... and refused
trigger hand via=n1 expect=stale_epoch      # a client write it stamps is refused too
trigger hand                                # the retry through the real leader applies
check fenced
check no-stale-epoch-runs
check exactly-once t
check exactly-once u
check manual-runs hand 1
stepdown n1         # n1 learns; it rejoins as a follower
run 5s
check exactly-once t
check exactly-once u
check never-early
check replicas-agree
"""

# --------------------------------------------------------------------------- restarts

CRASH_AND_RESTART_FROM_STORE = """
cluster n1 n2 n3
elect n1
task t cron "* * * * * *" overlap=allow
task f every 3s
run 5s
crash n3
run 10s
restart n3          # replays the log from its store's applied index
check replicas-agree
run 5s
crash n1
elect n3            # the restarted node leads
run 5s
check exactly-once t
check exactly-once f
check no-stale-epoch-runs
check replicas-agree
"""

WIPE_AND_RESTART = """
cluster n1 n2 n3 n4 n5
elect n2
task t cron "* * * * * *" overlap=allow
task h manual
run 8s
trigger h
crash n4
run 4s
restart n4 wipe     # an empty disk: catches up from the whole log
check replicas-agree
crash n2
elect n4
run 6s
check exactly-once t
check manual-runs h 1
check replicas-agree
"""

# --------------------------------------------------------------------------- clocks

NEW_LEADER_CLOCK_BEHIND = """
cluster n1 n2 n3
elect n1
task t cron "* * * * * *" overlap=allow
run 10s
skew n2 -2s         # n2's clock is 2 s behind the time n1 already committed
crash n1
elect n2
run 10s
check monotonic-time            # n2 never decides anything with a "now" below +10s
check never-early
check outcome t +11s fired      # fired when n2's own clock reached +11s (2 s late, within grace)
check exactly-once t
task late cron "* * * * * *" overlap=allow   # created on the lagging leader: stamped at committed time
run 5s
check exactly-once late
check monotonic-time
check replicas-agree
"""

NEW_LEADER_CLOCK_AHEAD_THEN_NORMAL = """
cluster n1 n2 n3
elect n1
task t cron "* * * * * *" overlap=allow
run 5s
skew n2 +3s         # n2 runs 3 s fast: it fires by its own clock (never early by it)
crash n1
elect n2
run 5s
restart n1
crash n2
elect n3            # n3's clock is right, i.e. 3 s behind what n2 committed
run 10s
check monotonic-time
check never-early
check exactly-once t
check replicas-agree
"""

# --------------------------------------------------------------------------- policies

OVERLAP_SKIP_VERSUS_ALLOW = """
cluster n1 n2 n3
elect n1
task s cron "* * * * * *"                   # overlap=skip is the default
task a cron "* * * * * *" overlap=allow
run 10s             # no executor finishes anything: the first run stays unfinished
check count s fired 1
check count s skipped_overlap 9
check outcome s +1s fired
check outcome s +2s skipped_overlap
check runs s 1
check count a fired 10
check runs a 10
check exactly-once s
check exactly-once a
"""

DISABLE_AND_ENABLE = """
cluster n1 n2 n3
elect n1
task t cron "* * * * * *" overlap=allow
run 5s
disable t
run 10s             # nothing is owed while disabled
check outcome t +5s fired
check outcome t +8s none
enable t            # the watermark jumps to now: +6s .. +15s are not owed
run 5s
check outcome t +15s none
check outcome t +16s fired
check count t fired 10
check exactly-once t
crash n1
elect n2
run 3s
check exactly-once t
check replicas-agree
"""

DISABLE_RIGHT_AFTER_FAILOVER = """
cluster n1 n2 n3
elect n1
task t every 2s overlap=allow       # fires at +2s, +4s, ...
run 3s
crash n1
run 10s             # +4s .. +12s fall due while nobody leads
elect n2            # n2's barrier commits; its first poll comes on the next tick ...
disable t           # ... a disable arriving first is refused until the backlog is accounted
run 4s
enable t
run 3s
check outcome t +4s coalesced       # 9 s late at +13s: beyond the grace (misfire=latest)
check outcome t +6s coalesced
check outcome t +8s fired           # exactly 5 s late: still inside the grace
check outcome t +12s fired
check outcome t +14s none           # due while disabled: not owed
check exactly-once t                # nothing that fell due while t was enabled vanished
check replicas-agree
"""

ONE_SHOT_AND_MANUAL = """
cluster n1 n2 n3
elect n1
task o at +5s
task h manual
run 3s
trigger h
crash n1
run 4s              # the one-shot falls due while nobody leads
elect n3            # +7s: 2 s late, within the grace
trigger h
run 5s
check outcome o +5s fired
check exactly-once o
check manual-runs h 2
check runs h 2
check replicas-agree
"""

SCENARIOS = {
    "leader-crash-within-grace": LEADER_CRASH_WITHIN_GRACE,
    "leader-crash-beyond-grace": LEADER_CRASH_BEYOND_GRACE,
    "misfire-all-and-skip-over-long-outage": MISFIRE_ALL_AND_SKIP_OVER_LONG_OUTAGE,
    "deposed-leader-is-fenced": DEPOSED_LEADER_IS_FENCED,
    "crash-and-restart-from-store": CRASH_AND_RESTART_FROM_STORE,
    "wipe-and-restart": WIPE_AND_RESTART,
    "new-leader-clock-behind": NEW_LEADER_CLOCK_BEHIND,
    "new-leader-clock-ahead-then-normal": NEW_LEADER_CLOCK_AHEAD_THEN_NORMAL,
    "overlap-skip-versus-allow": OVERLAP_SKIP_VERSUS_ALLOW,
    "disable-and-enable": DISABLE_AND_ENABLE,
    "disable-right-after-failover": DISABLE_RIGHT_AFTER_FAILOVER,
    "one-shot-and-manual": ONE_SHOT_AND_MANUAL,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name: str) -> None:
    scenario = run_scenario(SCENARIOS[name])
    assert scenario.checks_passed > 0


# --------------------------------------------------------------------------- random faults


@pytest.mark.parametrize("nodes", [3, 5])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_random_fault_schedule(seed: int, nodes: int) -> None:
    script = random_fault_script(seed, nodes, minutes=3)
    scenario = run_scenario(script)
    assert scenario.checks_passed == 10


def test_a_disable_racing_the_first_poll_is_retried_not_lossy() -> None:
    scenario = run_scenario(DISABLE_RIGHT_AFTER_FAILOVER)
    assert scenario.write_retries == 1  # refused once (fires due, not yet accounted), then applied


def test_random_fault_script_is_reproducible() -> None:
    assert random_fault_script(7, 5) == random_fault_script(7, 5)
    assert random_fault_script(7, 5) != random_fault_script(8, 5)


# --------------------------------------------------------------------------- the checker itself


def test_scenario_restart_replays_only_entries_beyond_the_stored_index() -> None:
    scenario = run_scenario(
        """
        cluster n1 n2 n3
        elect n1
        task t cron "* * * * * *" overlap=allow
        run 5s
        crash n3
        run 5s
        """
    )
    sim = scenario.sim
    applied_before = sim.cluster.nodes["n3"].applied
    sim.restart("n3")
    sim.settle()
    replica = sim.nodes["n3"].replica
    assert replica.entries_skipped == 0
    assert replica.entries_applied == len(sim.cluster.log) - applied_before > 0
    assert len(set(sim.digests().values())) == 1


def test_a_lost_fire_record_fails_exactly_once() -> None:
    scenario = run_scenario(
        """
        cluster n1 n2 n3
        elect n1
        task t cron "* * * * * *" overlap=allow
        run 5s
        """
    )
    from raftsched.fsm import keys

    for node in scenario.sim.nodes.values():  # corrupt every replica the same way
        node.store.delete(keys.time_key(keys.FIRE, "t", T0 + 3000))
    with pytest.raises(ScenarioError, match=r"never accounted, first \+3s"):
        scenario.check_exactly_once("t")


def test_a_wrong_range_count_fails_exactly_once() -> None:
    scenario = run_scenario(
        """
        cluster n1 n2 n3
        elect n1
        task s cron "* * * * * *" overlap=allow
        run 2s
        crash n1
        run 20s
        elect n2
        run 1s
        check outcome s +3s coalesced
        """
    )
    from raftsched.fsm import keys
    from raftsched.v1 import raftsched_pb2 as pb

    key = keys.time_key(keys.FIRE, "s", T0 + 3000)
    for node in scenario.sim.nodes.values():
        rec = pb.FireRecord.FromString(node.store.get(key) or b"")
        rec.count += 1
        node.store.put(key, rec.SerializeToString(deterministic=True))
    with pytest.raises(ScenarioError, match="count="):
        scenario.check_exactly_once("s")


def test_a_failing_check_names_its_line() -> None:
    with pytest.raises(ScenarioError, match=r"line 5: check count t fired 99"):
        run_scenario(
            """cluster n1 n2 n3
            elect n1
            task t cron "* * * * * *" overlap=allow
            run 3s
            check count t fired 99
            """
        )


def test_unknown_commands_are_refused() -> None:
    with pytest.raises(ScenarioError, match="unknown command 'explode'"):
        run_scenario("cluster n1\nexplode n1\n")
    with pytest.raises(ScenarioError, match="first command must be"):
        run_scenario("elect n1\n")
