"""A tiny scenario language for whole-cluster simulations on a manual clock.

A scenario is a text script, one command per line (``#`` starts a comment). It drives a
:class:`raftsched.testing.SimHarness` and checks the invariants of docs/architecture.md §3 against what the
cluster committed. Times in checks are offsets from the scenario's start, ``T0`` (a whole
minute, so ``"* * * * *"`` fires at ``+60s``, ``+120s`` ...)::

    cluster n1 n2 n3
    elect n1
    task t cron "* * * * * *" overlap=allow
    run 10s
    crash n1
    run 3s
    elect n2
    run 10s
    check exactly-once t
    check replicas-agree

Commands
    ``cluster N...`` (first line) · ``elect N`` · ``run DUR`` · ``crash N`` · ``restart N [wipe]`` ·
    ``partition N...`` (cut off from the majority) · ``heal`` · ``stepdown N`` (a deposed leader
    learns it no longer leads) · ``skew N ±DUR`` · ``snapshot-catch-up N...`` (their next catch-up
    installs a snapshot, skipping the applies) · ``lose-outcomes N COUNT [late]`` (N's next COUNT
    committed proposals never hear back, or only "outcome unknown" after the next election; see
    :class:`raftsched.consensus.memory.SimFaults`) · ``disable NAME`` · ``enable NAME`` ·
    ``trigger NAME [via=N] [expect=CODE]`` · ``task NAME (cron EXPR [tz=Z] | every DUR | at +DUR | manual)
    [misfire=latest|all|skip] [overlap=skip|allow] [cap=N] [window=DUR] [shards=N] [disabled]``.
    Durations: ``500ms``, ``10s``, ``3m``, ``1h``, or combined (``2m30s``).

Checks
    ``check exactly-once NAME`` — every nominal fire from the task's creation up to its watermark
    (except while it was disabled) is covered by exactly one fire record; range records cover
    exactly ``count`` nominal fires; fired records and runs match one to one; no fire id was ever
    given a second run anywhere in the log; the task is not stalled (its next fire is after the
    leader's now). The nominal fires are computed here, independently of the planner: plain
    arithmetic for intervals and one-shots, :class:`CronSchedule` for cron.
    ``check never-early`` — no fire record or run has a nominal time after the time it was decided.
    ``check monotonic-time`` — every fire batch that accounted a fire was stamped at or after the
    leader time already committed (a new leader never uses an earlier "now").
    ``check outcome NAME +DUR OUTCOME`` — how the nominal fire at ``T0 + DUR`` was accounted
    (``fired``, ``coalesced``, ``skipped_overlap``, ``skipped_misfire``, ``skipped_disabled``,
    ``none``). ``check count NAME OUTCOME N`` — nominal fires accounted with that outcome.
    ``check runs NAME N`` — runs created (fired and manual). ``check manual-runs NAME N``.
    ``check replicas-agree`` — every live, connected node applied the whole log and has the
    same digest as a fresh state machine that replays the log (invariant 5).
    ``check no-stale-epoch-runs`` — every run was created by a command whose epoch was the
    newest applied so far, and no command carries an epoch newer than the term it committed in.
    ``check fenced`` — at least one command of a deposed leader reached the log and was refused
    as ``stale_epoch``.
"""

from __future__ import annotations

import random
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field

from raftsched import codec
from raftsched.errors import RaftschedError, Unavailable
from raftsched.fsm.effects import AttemptReady, Effect
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    TaskSpec,
    Trigger,
    run_id_for,
)
from raftsched.storage.memory import MemoryStore
from raftsched.testing import SimHarness
from raftsched.timing.cron import CronSchedule
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000  # 2023-11-14T22:14:00Z, a whole minute

OUTCOMES: dict[str, int] = {
    "fired": pb.FIRED,
    "coalesced": pb.COALESCED,
    "skipped_overlap": pb.SKIPPED_OVERLAP,
    "skipped_misfire": pb.SKIPPED_MISFIRE,
    "skipped_disabled": pb.SKIPPED_DISABLED,
}
OUTCOME_NAMES = {v: k for k, v in OUTCOMES.items()}

_DURATION_RE = re.compile(r"([+-]?)((?:\d+(?:ms|s|m|h))+)")
_PART_RE = re.compile(r"(\d+)(ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


class ScenarioError(AssertionError):
    """A scenario line failed: a check did not hold, or the line is malformed."""


def duration_ms(text: str) -> int:
    """``"10s"`` → 10000; ``"2m30s"``, ``"500ms"``, ``"-2s"`` and ``"+1h"`` work too."""
    match = _DURATION_RE.fullmatch(text)
    if match is None:
        raise ScenarioError(f"not a duration: {text!r} (use e.g. 500ms, 10s, 3m, 1h, 2m30s)")
    total = sum(int(n) * _UNIT_MS[unit] for n, unit in _PART_RE.findall(match.group(2)))
    return -total if match.group(1) == "-" else total


def nominal_fires(trigger: Trigger, after_ms: int, through_ms: int) -> list[int]:
    """Every nominal fire ``f`` of ``trigger`` with ``after_ms < f <= through_ms``, ascending.

    Deliberately not the planner's code: intervals and one-shots are plain arithmetic, cron is
    the DST-aware :class:`CronSchedule` (the one thing we do not re-derive).
    """
    if through_ms <= after_ms:
        return []
    match trigger:
        case IntervalTrigger(every, start):
            first = start if after_ms < start else start + ((after_ms - start) // every + 1) * every
            return list(range(first, through_ms + 1, every))
        case OnceTrigger(at):
            return [at] if after_ms < at <= through_ms else []
        case CronTrigger(expr, tz):
            return CronSchedule.parse(expr, tz).fires_between(after_ms, through_ms, limit=10_000_000)
        case _:
            return []


@dataclass
class TaskTrack:
    """What the scenario itself knows about a task (not read back from the cluster)."""

    name: str
    trigger: Trigger
    created_watermark_ms: int
    disabled_since_ms: int | None = None
    # (after, through]: nominal fires not owed because the task was disabled.
    exempt: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class LogEntry:
    """One committed entry replayed into a fresh state machine, with what it saw and did."""

    index: int
    term: int
    cmd: pb.Command | None  # None when the bytes do not decode
    result: pb.CommandResult
    effects: tuple[Effect, ...]
    epoch_before: int
    now_before: int


class Scenario:
    """Parse and run a scenario script. ``run()`` raises :class:`ScenarioError` on the first failure."""

    def __init__(
        self,
        text: str,
        *,
        misfire: MisfireSettings | None = None,
        retention: Retention | None = None,
        step_ms: int = 100,
    ) -> None:
        self.text = text
        self.misfire = misfire or MisfireSettings()
        self.retention = retention or Retention()
        self.step_ms = step_ms
        self._sim: SimHarness | None = None
        self.tasks: dict[str, TaskTrack] = {}
        self.checks_passed = 0
        self.write_retries = 0
        self._replay_cache: tuple[int, list[LogEntry], str] | None = None

    @property
    def sim(self) -> SimHarness:
        if self._sim is None:
            raise ScenarioError("the first command must be `cluster N...`")
        return self._sim

    # -- running ---------------------------------------------------------------------------------

    def run(self) -> Scenario:
        for lineno, raw in enumerate(self.text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            words = shlex.split(line)
            try:
                self._execute(words)
            except ScenarioError as exc:
                raise ScenarioError(
                    f"line {lineno}: {line}\n  {exc}\n--- scenario ---\n{self.text}"
                ) from None
            except Exception as exc:
                raise ScenarioError(
                    f"line {lineno}: {line}\n  {type(exc).__name__}: {exc}\n--- scenario ---\n{self.text}"
                ) from exc
        return self

    def _execute(self, words: list[str]) -> None:
        verb, args = words[0], words[1:]
        if verb == "cluster":
            self._sim = SimHarness(
                args, start_ms=T0, misfire=self.misfire, retention=self.retention, step_ms=self.step_ms
            )
        elif verb == "elect":
            self.sim.elect(args[0])
        elif verb == "run":
            self.sim.run_for(duration_ms(args[0]))
        elif verb == "crash":
            self.sim.crash(args[0])
        elif verb == "restart":
            node = args[0]
            if self.sim.cluster.nodes[node].up:
                self.sim.crash(node)
            self.sim.restart(node, wipe="wipe" in args[1:])
            self.sim.settle()
        elif verb == "partition":
            self.sim.cluster.partition(*args)
        elif verb == "heal":
            self.sim.cluster.heal()
            self.sim.settle()
        elif verb == "stepdown":
            self.sim.cluster.step_down(args[0])
        elif verb == "skew":
            self.sim.skew(args[0], duration_ms(args[1]))
        elif verb == "snapshot-catch-up":
            self.sim.cluster.faults.snapshot_catch_up.update(args)
        elif verb == "lose-outcomes":
            self.sim.cluster.faults.unknown_outcomes[args[0]] = int(args[1])
            self.sim.cluster.faults.late_outcomes = args[2:] == ["late"]
        elif verb == "task":
            self._task(args)
        elif verb in ("disable", "enable"):
            self._set_enabled(args[0], verb == "enable")
        elif verb == "trigger":
            self._trigger(args[0], dict(opt.split("=", 1) for opt in args[1:]))
        elif verb == "check":
            self._check(args)
            self.checks_passed += 1
        else:
            raise ScenarioError(f"unknown command {verb!r}")

    def _task(self, args: list[str]) -> None:
        name, kind, rest = args[0], args[1], args[2:]
        trigger: Trigger
        if kind == "cron":
            expr, rest = rest[0], rest[1:]
            tz = "UTC"
            for opt in list(rest):
                if opt.startswith("tz="):
                    tz = opt[3:]
                    rest.remove(opt)
            trigger = CronTrigger(expr, tz)
        elif kind == "every":
            trigger, rest = IntervalTrigger(duration_ms(rest[0])), rest[1:]
        elif kind == "at":
            trigger, rest = OnceTrigger(self.sim.clock.now_ms() + duration_ms(rest[0])), rest[1:]
        elif kind == "manual":
            trigger = ManualTrigger()
        else:
            raise ScenarioError(f"unknown trigger kind {kind!r}")
        options: dict[str, str] = {}
        disabled = False
        for opt in rest:
            if opt == "disabled":
                disabled = True
                continue
            key, sep, value = opt.partition("=")
            if not sep or key not in ("misfire", "overlap", "cap", "window", "shards"):
                raise ScenarioError(f"unknown task option {opt!r}")
            options[key] = value
        spec = TaskSpec(
            name,
            trigger,
            misfire=Misfire(options.get("misfire", "latest")),
            overlap=Overlap(options.get("overlap", "skip")),
            misfire_all_cap=int(options.get("cap", "0")),
            misfire_all_window_ms=duration_ms(options["window"]) if "window" in options else 0,
            shards=int(options.get("shards", "1")),
            command="true",
        )
        record = self.sim.add_task(spec, disabled=disabled)
        stored = codec.spec_from_pb(record.spec).trigger
        if isinstance(trigger, IntervalTrigger):
            # Anchoring is part of the contract: no start means "one interval after creation".
            expected = IntervalTrigger(trigger.every_ms, record.created_ms + trigger.every_ms)
            if stored != expected:
                raise ScenarioError(f"interval stored as {stored}, expected {expected}")
        track = TaskTrack(name, stored, record.watermark_ms)
        if disabled:
            track.disabled_since_ms = record.watermark_ms
        self.tasks[name] = track

    def _write_with_retry(self, build: str, *args: object) -> pb.CommandResult:
        """A client write as the SDK makes it: ``unavailable`` is retried, here after one leader tick
        at the same instant (the leader's loop runs before the retry arrives)."""
        for _ in range(20):
            try:
                return self.sim.write(build, *args)
            except Unavailable:
                self.write_retries += 1
                self.sim.tick()
        raise ScenarioError(f"{build}{args} still unavailable after 20 retries")

    def _trigger(self, name: str, options: dict[str, str]) -> None:
        """``trigger NAME [via=N] [expect=CODE]``: a manual run, stamped by ``via`` (default: the leader)."""
        expect = options.get("expect", "ok")
        try:
            self.sim.write("trigger_now", name, "", via=options.get("via"))
            got = "ok"
        except RaftschedError as exc:
            got = exc.code
        if got != expect:
            raise ScenarioError(f"trigger {name}: {got}, expected {expect}")

    def _set_enabled(self, name: str, enabled: bool) -> None:
        track = self.tasks[name]
        record = self._write_with_retry("set_enabled", name, enabled).task
        if enabled and track.disabled_since_ms is not None:
            track.exempt.append((track.disabled_since_ms, record.watermark_ms))
            track.disabled_since_ms = None
        elif not enabled and track.disabled_since_ms is None:
            # Fires up to the disable command's time are still owed; after it, not.
            track.disabled_since_ms = record.updated_ms

    # -- observation -----------------------------------------------------------------------------

    def reference(self) -> str:
        """A live, connected, caught-up node to read from (the leader if it qualifies)."""
        sim = self.sim
        log_len = len(sim.cluster.log)
        candidates = [
            n for n in sim.nodes if sim.cluster.connected(n) and sim.cluster.nodes[n].applied == log_len
        ]
        if not candidates:
            raise ScenarioError("no live node has applied the whole log")
        return sim.leader if sim.leader in candidates else candidates[0]

    def replay(self) -> tuple[list[LogEntry], str]:
        """The committed log applied to a fresh state machine: per-entry facts and the final digest."""
        log = self.sim.cluster.log
        if self._replay_cache is not None and self._replay_cache[0] == len(log):
            return self._replay_cache[1], self._replay_cache[2]
        state = SchedulerState.load(MemoryStore(), self.retention)
        entries: list[LogEntry] = []
        for index, (term, data) in enumerate(log, start=1):
            epoch_before, now_before = state.max_epoch, state.max_now_ms
            applied = state.apply(data)
            try:
                cmd: pb.Command | None = codec.decode_command(data)
            except Exception:
                cmd = None
            entries.append(
                LogEntry(index, term, cmd, applied.result, applied.effects, epoch_before, now_before)
            )
        digest = state.digest()
        self._replay_cache = (len(log), entries, digest)
        return entries, digest

    def fire_records(self, name: str) -> list[pb.FireRecord]:
        return self.sim.fires(name, self.reference())

    def runs(self, name: str) -> list[pb.Run]:
        return self.sim.runs(name, self.reference())

    def covered(self, name: str) -> dict[int, pb.FireRecord]:
        """Nominal time → the record that accounts it (checking range records along the way)."""
        track = self.tasks[name]
        out: dict[int, pb.FireRecord] = {}
        for rec in self.fire_records(name):
            if rec.through_ms:
                nominals = nominal_fires(track.trigger, rec.nominal_ms - 1, rec.through_ms)
                if not nominals or nominals[0] != rec.nominal_ms or nominals[-1] != rec.through_ms:
                    raise ScenarioError(
                        f"range record {rec.nominal_ms}..{rec.through_ms} does not start/end on fires"
                    )
                if len(nominals) != rec.count:
                    raise ScenarioError(
                        f"range record {rec.nominal_ms}..{rec.through_ms} says count={rec.count}, "
                        f"the trigger has {len(nominals)} fires there"
                    )
            else:
                nominals = [rec.nominal_ms]
                if rec.count != 1:
                    raise ScenarioError(f"single record at {rec.nominal_ms} has count={rec.count}")
            for n in nominals:
                if n in out:
                    raise ScenarioError(
                        f"nominal fire {_t(n)} accounted twice ({_rec(out[n])} and {_rec(rec)})"
                    )
                out[n] = rec
        return out

    # -- checks ----------------------------------------------------------------------------------

    def _check(self, args: list[str]) -> None:
        kind = args[0]
        if kind == "exactly-once":
            self.check_exactly_once(args[1])
        elif kind == "never-early":
            self.check_never_early()
        elif kind == "monotonic-time":
            self.check_monotonic_time()
        elif kind == "outcome":
            self.check_outcome(args[1], T0 + duration_ms(args[2]), args[3])
        elif kind == "count":
            got = sum(r.count or 1 for r in self.fire_records(args[1]) if r.outcome == OUTCOMES[args[2]])
            if got != int(args[3]):
                raise ScenarioError(f"{args[1]}: {got} fires {args[2]}, expected {args[3]}")
        elif kind == "runs":
            got = len(self.runs(args[1]))
            if got != int(args[2]):
                raise ScenarioError(f"{args[1]}: {got} runs, expected {args[2]}")
        elif kind == "manual-runs":
            got = sum(1 for r in self.runs(args[1]) if r.manual)
            if got != int(args[2]):
                raise ScenarioError(f"{args[1]}: {got} manual runs, expected {args[2]}")
        elif kind == "replicas-agree":
            self.check_replicas_agree()
        elif kind == "no-stale-epoch-runs":
            self.check_no_stale_epoch_runs()
        elif kind == "fenced":
            self.check_fenced()
        else:
            raise ScenarioError(f"unknown check {kind!r}")

    def check_exactly_once(self, name: str) -> None:
        sim, track = self.sim, self.tasks[name]
        ref = self.reference()
        record = sim.nodes[ref].state.get_task(name)
        if record is None:
            raise ScenarioError(f"task {name} does not exist on {ref}")
        covered = self.covered(name)
        owed = nominal_fires(track.trigger, track.created_watermark_ms, record.watermark_ms)
        exempt = list(track.exempt)
        if track.disabled_since_ms is not None:
            exempt.append((track.disabled_since_ms, 2**62))
        required = {n for n in owed if not any(lo < n <= hi for lo, hi in exempt)}
        missing = sorted(required - covered.keys())
        extra = sorted(set(covered) - set(owed))
        if missing:
            raise ScenarioError(f"{name}: {len(missing)} nominal fires never accounted, first {_ts(missing)}")
        if extra:
            raise ScenarioError(f"{name}: fires accounted that are not owed: {_ts(extra)}")
        records = self.fire_records(name)
        if record.fires_total != len(covered) or record.kept_fires != len(records):
            raise ScenarioError(
                f"{name}: counters say {record.fires_total} fires in {record.kept_fires} records, "
                f"the store holds {len(covered)} in {len(records)} (a record was overwritten or pruned)"
            )
        # Fired records and runs, one to one.
        runs = {r.run_id: r for r in self.runs(name)}
        fired = [r for r in records if r.outcome == pb.FIRED]
        for rec in fired:
            run = runs.get(rec.run_id)
            if rec.run_id != run_id_for(name, rec.nominal_ms) or run is None:
                raise ScenarioError(f"{name}: fired record {_rec(rec)} has no run")
            if (run.nominal_ms, run.epoch, run.task_version) != (rec.nominal_ms, rec.epoch, rec.task_version):
                raise ScenarioError(f"{name}: run {run.run_id} disagrees with its fire record")
        scheduled = [r for r in runs.values() if not r.manual]
        if len(scheduled) != len(fired):
            raise ScenarioError(f"{name}: {len(scheduled)} scheduled runs for {len(fired)} fired records")
        if record.runs_total != len(runs):
            raise ScenarioError(f"{name}: runs_total={record.runs_total}, {len(runs)} runs stored")
        # No fire id ever got a second run, anywhere in the log (the store would hide an overwrite).
        entries, _ = self.replay()
        created = Counter(
            e.run_id
            for entry in entries
            for e in entry.effects
            if isinstance(e, AttemptReady) and e.task == name and e.shard == 0 and e.attempt == 1
        )
        twice = [run_id for run_id, n in created.items() if n > 1]
        if twice:
            raise ScenarioError(f"{name}: runs created twice: {twice[:5]}")
        # Not stalled: with a working leader, everything due by its clock has been accounted.
        leader = sim.leader
        if leader is not None and record.enabled and record.next_fire_ms:
            driver = sim.nodes[leader].driver
            if driver.ready and record.next_fire_ms <= driver.last_now_ms:
                raise ScenarioError(
                    f"{name}: stalled — next fire {_t(record.next_fire_ms)} is due by the leader's "
                    f"clock ({_t(driver.last_now_ms)}) but was never accounted"
                )

    def check_never_early(self) -> None:
        for name in self.tasks:
            for rec in self.fire_records(name):
                if max(rec.nominal_ms, rec.through_ms) > rec.decided_ms:
                    raise ScenarioError(f"{name}: fire {_rec(rec)} decided early, at {_t(rec.decided_ms)}")
            for run in self.runs(name):
                if not run.manual and run.nominal_ms > run.created_ms:
                    raise ScenarioError(f"{name}: run {run.run_id} created at {_t(run.created_ms)}, early")

    def check_monotonic_time(self) -> None:
        entries, _ = self.replay()
        for entry in entries:
            cmd = entry.cmd
            if cmd is None or cmd.WhichOneof("body") != "fire_batch" or not entry.result.accounted:
                continue
            if cmd.now_ms < entry.now_before:
                raise ScenarioError(
                    f"entry {entry.index}: a fire batch stamped {_t(cmd.now_ms)} accounted fires after the "
                    f"cluster had committed leader time {_t(entry.now_before)}"
                )

    def check_outcome(self, name: str, at_ms: int, outcome: str) -> None:
        rec = self.covered(name).get(at_ms)
        got = "none" if rec is None else OUTCOME_NAMES.get(rec.outcome, str(rec.outcome))
        if got != outcome:
            raise ScenarioError(f"{name}: the fire at {_t(at_ms)} is {got}, expected {outcome}")

    def check_replicas_agree(self) -> None:
        sim = self.sim
        log_len = len(sim.cluster.log)
        live = [n for n in sim.nodes if sim.cluster.connected(n)]
        behind = {n: sim.cluster.nodes[n].applied for n in live if sim.cluster.nodes[n].applied != log_len}
        if behind:
            raise ScenarioError(f"nodes behind the log ({log_len} entries): {behind}")
        digests = {n: sim.nodes[n].state.digest() for n in live}
        _, replayed = self.replay()
        differ = {n: d[:12] for n, d in digests.items() if d != replayed}
        if differ:
            raise ScenarioError(f"digests differ from a fresh replay ({replayed[:12]}): {differ}")

    def check_no_stale_epoch_runs(self) -> None:
        entries, _ = self.replay()
        for entry in entries:
            created = [e for e in entry.effects if isinstance(e, AttemptReady) and e.attempt == 1]
            if not created:
                continue
            assert entry.cmd is not None
            if entry.cmd.epoch < entry.epoch_before:
                raise ScenarioError(
                    f"entry {entry.index}: epoch {entry.cmd.epoch} created runs after epoch "
                    f"{entry.epoch_before} was applied: {[e.run_id for e in created][:3]}"
                )
            if entry.cmd.epoch > entry.term:
                raise ScenarioError(
                    f"entry {entry.index}: epoch {entry.cmd.epoch} from the future (term {entry.term})"
                )
            if any(e.epoch != entry.cmd.epoch for e in created):
                raise ScenarioError(f"entry {entry.index}: a run does not carry its command's epoch")

    def check_fenced(self) -> None:
        entries, _ = self.replay()
        fenced = [e for e in entries if e.result.code == "stale_epoch"]
        if not fenced:
            raise ScenarioError("no command of a deposed leader was fenced")
        if any(e.effects for e in fenced):
            raise ScenarioError("a fenced command had effects")


def run_scenario(
    text: str,
    *,
    misfire: MisfireSettings | None = None,
    retention: Retention | None = None,
    step_ms: int = 100,
) -> Scenario:
    return Scenario(text, misfire=misfire, retention=retention, step_ms=step_ms).run()


def _t(ms: int) -> str:
    return f"+{(ms - T0) / 1000:g}s"


def _ts(values: list[int]) -> str:
    return ", ".join(_t(v) for v in values[:5]) + (" ..." if len(values) > 5 else "")


def _rec(rec: pb.FireRecord) -> str:
    span = f"{_t(rec.nominal_ms)}..{_t(rec.through_ms)}" if rec.through_ms else _t(rec.nominal_ms)
    return f"{span} {OUTCOME_NAMES.get(rec.outcome, rec.outcome)} (epoch {rec.epoch})"


# ---------------------------------------------------------------------------------------------
# Seeded random fault schedules, written out as scenario text (so a failure prints a readable,
# replayable script).

FAULT_TASKS = """\
task sec cron "* * * * * *" overlap=allow
task two every 2s misfire=all overlap=allow
task min cron "* * * * *" misfire=skip overlap=allow
task five every 5s
task odd cron "* * * * * */7" misfire=all cap=3 window=1m overlap=allow
task once at +45s
task hand manual
"""


def random_fault_script(seed: int, node_count: int, minutes: int = 3) -> str:
    """Crashes, restarts (some wiping the disk), partitions, heals, elections, step-downs, clock
    skew and a few client writes, chosen by ``seed``; only commands the cluster model allows
    (an election needs a connected node and a majority). Ends healed, with a leader, and checks
    every invariant for every task."""
    rng = random.Random(seed)
    nodes = [f"n{i}" for i in range(1, node_count + 1)]
    up, isolated, believers = set(nodes), set[str](), {"n1"}
    leader: str | None = "n1"
    lines = [
        f"# seed {seed}, {node_count} nodes",
        f"cluster {' '.join(nodes)}",
        "elect n1",
        *FAULT_TASKS.splitlines(),
    ]
    disabled = False

    def connected(n: str) -> bool:
        return n in up and n not in isolated

    def quorum() -> bool:
        return sum(1 for n in nodes if connected(n)) * 2 > len(nodes)

    elapsed = 0
    while elapsed < minutes * 60_000:
        # Faults are frequent, but a leaderless cluster is soon given a leader again when it can.
        electable = leader is None and quorum()
        op = rng.choices(
            ["run", "crash", "restart", "partition", "heal", "elect", "stepdown", "skew", "write", "depose"],
            weights=[10, 2, 2, 2, 3 if isolated else 0, 12 if electable else 1, 1, 1, 2, 2],
        )[0]
        if op == "run":
            ms = rng.randrange(1, 12) * 1000 + rng.choice([0, 0, 300, 700])
            elapsed += ms
            lines.append(f"run {ms}ms")
        elif op == "crash":
            node = rng.choice(sorted(up)) if up else None
            if node is not None:
                up.discard(node)
                believers.discard(node)
                leader = None if leader == node else leader
                lines.append(f"crash {node}")
        elif op == "restart":
            down = sorted(set(nodes) - up)
            if down:
                node = rng.choice(down)
                up.add(node)
                lines.append(f"restart {node}" + (" wipe" if rng.random() < 0.3 else ""))
        elif op == "partition":
            candidates = sorted(n for n in nodes if connected(n))
            if candidates:
                cut = rng.sample(
                    candidates, min(len(candidates), rng.randint(1, max(1, (len(nodes) - 1) // 2)))
                )
                isolated.update(cut)
                leader = None if leader in cut else leader
                lines.append(f"partition {' '.join(sorted(cut))}")
        elif op == "heal":
            isolated.clear()
            lines.append("heal")
        elif op == "elect":
            candidates = sorted(n for n in nodes if connected(n))
            if candidates and quorum():
                leader = rng.choice(candidates)
                believers = {b for b in believers if not connected(b)} | {leader}
                lines.append(f"elect {leader}")
        elif op == "stepdown":
            deposed = sorted(b for b in believers if b != leader)
            if deposed:
                node = rng.choice(deposed)
                believers.discard(node)
                lines.append(f"stepdown {node}")
        elif op == "skew":
            lines.append(f"skew {rng.choice(nodes)} {rng.choice(['-', '+'])}{rng.randrange(0, 3000)}ms")
        elif op == "depose" and leader is not None:
            # Cut the leader off, elect another, heal: the old leader still believes it leads.
            old = leader
            isolated.add(old)
            others = sorted(n for n in nodes if connected(n))
            if others and quorum():
                leader = rng.choice(others)
                believers = {b for b in believers if not connected(b)} | {leader}
                lines += [f"partition {old}", f"elect {leader}", f"run {rng.randrange(1, 5)}s", "heal"]
                isolated.clear()
            else:
                isolated.discard(old)
        elif op == "write" and leader is not None and quorum():
            if rng.random() < 0.5:
                lines.append("trigger hand")
            else:
                lines.append("enable two" if disabled else "disable two")
                disabled = not disabled
    finale = ["heal", *[f"restart {n}" for n in nodes if n not in up]]
    finale += [f"elect {rng.choice(nodes)}", "run 20s"]
    finale += [f"check exactly-once {t}" for t in ("sec", "two", "min", "five", "odd", "once")]
    finale += [
        "check never-early",
        "check monotonic-time",
        "check no-stale-epoch-runs",
        "check replicas-agree",
    ]
    return "\n".join(lines + finale) + "\n"
