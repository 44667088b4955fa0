"""Leader-side fire planning: when a trigger fires next, and what to do with due and missed fires.

Pure: time enters as arguments. Runs only on the leader (it calls croniter through
:mod:`raftsched.timing.cron`); its output is written into commands so replicas never recompute it.
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.errors import InvalidSpec
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    TaskSpec,
    Trigger,
)
from raftsched.timing.cron import CronSchedule
from raftsched.v1 import log_pb2 as pb

# Most fires enumerated for one task in one plan. A larger backlog is caught up over several
# consecutive plans (each accounted in full), so a year of missed per-second fires never lands in
# one log entry or one apply.
MAX_FIRES_PER_PLAN = 10_000


@dataclass(frozen=True, slots=True)
class MisfireSettings:
    grace_ms: int = 5_000
    all_cap: int = 100
    all_window_ms: int = 3_600_000


# Many tasks share an expression and fall due together, so on the leader the same
# (expr, zone, after) question is asked thousands of times per tick: memoise the answer. A pure
# function of its key, so the memo cannot change any result; bounded by clearing.
_CRON_MEMO: dict[tuple[str, str, int], int] = {}
_CRON_MEMO_MAX = 200_000


def _cron_next(expr: str, tz: str, after_ms: int) -> int:
    key = (expr, tz, after_ms)
    hit = _CRON_MEMO.get(key)
    if hit is None:
        hit = CronSchedule.parse(expr, tz).next_after(after_ms)
        if len(_CRON_MEMO) >= _CRON_MEMO_MAX:
            _CRON_MEMO.clear()
        _CRON_MEMO[key] = hit
    return hit


def next_fire_after(trigger: Trigger, after_ms: int) -> int:
    """The first nominal fire strictly after ``after_ms``, or 0 if the trigger never fires again."""
    match trigger:
        case CronTrigger(expr, tz):
            return _cron_next(expr, tz, after_ms)
        case IntervalTrigger(every, start):
            if after_ms < start:
                return start
            return start + ((after_ms - start) // every + 1) * every
        case OnceTrigger(at):
            return at if at > after_ms else 0
        case ManualTrigger():
            return 0
    raise InvalidSpec("trigger", f"unknown trigger {trigger!r}")


def fires_in(trigger: Trigger, from_ms: int, to_ms: int, limit: int) -> list[int]:
    """The nominal fires ``f`` of a recurring trigger with ``from_ms <= f <= to_ms``, ascending,
    at most ``limit`` of them: a cron's occurrences on its wall clock, with the DST policy of its
    scheduled fires (:mod:`raftsched.timing.cron`: a repeated wall time fires once), an interval's
    ``start + k * every`` (none before its start). A one-shot or manual trigger has none."""
    if to_ms < from_ms or limit <= 0:
        return []
    match trigger:
        case CronTrigger(expr, tz):
            return CronSchedule.parse(expr, tz).fires_between(from_ms - 1, to_ms, limit)
        case IntervalTrigger(every, start):
            first = start if from_ms <= start else start + -(-(from_ms - start) // every) * every
            return list(range(first, to_ms + 1, every)[:limit])
    return []


def _count_missed_after(trigger: Trigger, after_ms: int, lo_ms: int, bound_ms: int, limit: int) -> int:
    """How many fires ``f > after_ms`` with ``lo_ms <= f < bound_ms`` exist (counting stops at ``limit``)."""
    n = 0
    t = next_fire_after(trigger, max(after_ms, lo_ms - 1))
    while t and t < bound_ms and n < limit:
        n += 1
        t = next_fire_after(trigger, t)
    return n


def prepare_spec(spec: TaskSpec, now_ms: int) -> tuple[TaskSpec, int]:
    """Validate a spec against the leader's clock and croniter; return it (anchored) and its first fire.

    An interval without a start is anchored at ``now + every`` so its phase survives updates and
    failovers. A one-shot time in the past is refused. Raises InvalidSpec naming the field.
    """
    trigger = spec.trigger
    if isinstance(trigger, CronTrigger):
        CronSchedule.parse(trigger.expr, trigger.timezone)
    elif isinstance(trigger, IntervalTrigger) and trigger.start_ms == 0:
        from dataclasses import replace

        spec = replace(spec, trigger=IntervalTrigger(trigger.every_ms, now_ms + trigger.every_ms))
    elif isinstance(trigger, OnceTrigger) and trigger.at_ms <= now_ms:
        raise InvalidSpec("trigger.at", f"{trigger.at_ms} is not in the future (now is {now_ms})")
    return spec, next_fire_after(spec.trigger, now_ms)


def single_on_time_fire(trigger: Trigger, next_fire_ms: int, now_ms: int, grace_ms: int) -> int | None:
    """The common case, taken by almost every fire of a healthy cluster: exactly one fire is due
    (``next_fire_ms``) and it is on time. Returns the fire after it (0: none), to be planned as
    :func:`single_fire`; None when the case does not apply (use :func:`plan_fires`)."""
    if not next_fire_ms or next_fire_ms > now_ms or next_fire_ms < now_ms - grace_ms:
        return None
    if type(trigger) is CronTrigger:  # next_fire_after's first case, without the match (per fire)
        following = _cron_next(trigger.expr, trigger.timezone, next_fire_ms)
    else:
        following = next_fire_after(trigger, next_fire_ms)
    if not following or following > now_ms:
        return following
    return None


# At most this many fires of one task in one catch-up of :func:`on_time_catch_up` (a task that
# fires more often than this per grace period goes through :func:`plan_fires`).
MAX_CATCH_UP_FIRES = 64


def on_time_catch_up(
    trigger: Trigger, next_fire_ms: int, now_ms: int, grace_ms: int
) -> tuple[list[int], int] | None:
    """The case a planner that fell a little behind takes: two or more fires are due since
    ``next_fire_ms`` and *every* one is on time (within ``grace_ms`` of ``now_ms``), at most
    :data:`MAX_CATCH_UP_FIRES` of them, and the trigger fires again after ``now_ms``. Returns
    ``(nominals, following)``: :func:`plan_fires` then fires each of ``nominals`` (outcome
    FIRED, no reason), with watermark ``now_ms`` and next fire ``following``. None when the case
    does not apply (:func:`single_on_time_fire`'s case included)."""
    if not next_fire_ms or next_fire_ms > now_ms or next_fire_ms < now_ms - grace_ms:
        return None
    nominals = [next_fire_ms]
    t = next_fire_after(trigger, next_fire_ms)
    while t and t <= now_ms:
        if len(nominals) >= MAX_CATCH_UP_FIRES:
            return None
        nominals.append(t)
        t = next_fire_after(trigger, t)
    if len(nominals) < 2 or not t:
        return None
    return nominals, t


def plan_missed(
    spec: TaskSpec, version: int, next_fire_ms: int, now_ms: int, settings: MisfireSettings
) -> pb.TaskFires | None:
    """The missed fires of a plan alone, when on-time fires follow them and the task's policy is
    ``latest`` or ``skip``: what :func:`plan_fires` decides for those fires (one range record,
    ``coalesced`` or ``skipped_misfire``, the same reason), with the watermark at the last of them
    and the next fire at the first on-time one. The caller plans the on-time fires next, as a
    leader does a task it is behind on by less than the grace (:func:`single_on_time_fire`,
    :func:`on_time_catch_up`: the state machine's columnar hot path), instead of as runs of the
    general path, ~10 times the apply cost on every node. Every nominal fire ends as
    :func:`plan_fires` would end it, if the on-time ones are still on time when planned.

    None when the shape does not apply: another policy, nothing missed, no on-time fire after
    the missed ones (``latest`` then runs the newest missed fire), or more missed fires than one
    plan accounts; :func:`plan_fires` plans it all then."""
    if spec.misfire not in (Misfire.LATEST, Misfire.SKIP):
        return None
    bound = now_ms - settings.grace_ms
    if not next_fire_ms or next_fire_ms >= bound:
        return None
    trigger = spec.trigger
    first, last, count = next_fire_ms, next_fire_ms, 0
    t = next_fire_ms
    while t and t < bound:
        if count >= MAX_FIRES_PER_PLAN:
            return None
        last, count = t, count + 1
        t = next_fire_after(trigger, t)
    if not t or t > now_ms:
        return None
    lateness = f"missed by more than the {settings.grace_ms // 1000}s grace"
    if spec.misfire == Misfire.LATEST:
        outcome, reason = pb.COALESCED, f"{lateness}; coalesced (misfire=latest)"
    else:
        outcome, reason = pb.SKIPPED_MISFIRE, f"{lateness}; skipped (misfire=skip)"
    fire = pb.Fire(nominal_ms=first, outcome=outcome, reason=reason, count=count)
    if count > 1:
        fire.through_ms = last
    return pb.TaskFires(task=spec.name, version=version, fires=[fire], watermark_ms=last, next_fire_ms=t)


def single_fire(task: str, version: int, nominal_ms: int, now_ms: int, following: int) -> pb.TaskFires:
    """What :func:`plan_fires` returns in the case :func:`single_on_time_fire` recognises.

    The leader driver builds the same message in place inside its batch (the hot path); this is
    the reference it is tested against."""
    return pb.TaskFires(
        task=task,
        version=version,
        fires=[pb.Fire(nominal_ms=nominal_ms, outcome=pb.FIRED, count=1)],
        watermark_ms=now_ms,
        next_fire_ms=following,
    )


def plan_fires(
    spec: TaskSpec, version: int, next_fire_ms: int, now_ms: int, settings: MisfireSettings
) -> pb.TaskFires | None:
    """Account every nominal fire in ``[next_fire_ms, now_ms]`` by the task's misfire policy.

    Returns None when nothing is due. A fire is *missed* when it is more than the grace period
    older than ``now_ms``; on-time fires always fire. Missed fires follow the policy:

    * ``latest``: if no on-time fire exists, the newest missed one fires; the rest are coalesced;
    * ``all``: missed fires inside the window fire, the newest ``cap`` of them; others are skipped;
    * ``skip``: every missed fire is skipped.

    Runs of identical non-fired outcomes are written as one range record (``through_ms``, ``count``).
    """
    if not next_fire_ms or next_fire_ms > now_ms:
        return None
    following = single_on_time_fire(spec.trigger, next_fire_ms, now_ms, settings.grace_ms)
    if following is not None:
        return single_fire(spec.name, version, next_fire_ms, now_ms, following)
    due: list[int] = []
    t = next_fire_ms
    while t and t <= now_ms and len(due) < MAX_FIRES_PER_PLAN:
        due.append(t)
        t = next_fire_after(spec.trigger, t)
    more = bool(t) and t <= now_ms  # the backlog continues past this plan
    bound = now_ms - settings.grace_ms
    missed = [f for f in due if f < bound]
    ontime = due[len(missed) :]
    decided: list[tuple[int, int, str]] = []  # (nominal, outcome, reason)
    lateness = f"missed by more than the {settings.grace_ms // 1000}s grace"
    if spec.misfire == Misfire.LATEST:
        if more or ontime:
            decided += [(f, pb.COALESCED, f"{lateness}; coalesced (misfire=latest)") for f in missed]
        elif missed:
            decided += [
                (f, pb.COALESCED, f"{lateness}; coalesced into the newest (misfire=latest)")
                for f in missed[:-1]
            ]
            decided.append((missed[-1], pb.FIRED, f"{lateness}; newest missed fire runs (misfire=latest)"))
    elif spec.misfire == Misfire.SKIP:
        decided += [(f, pb.SKIPPED_MISFIRE, f"{lateness}; skipped (misfire=skip)") for f in missed]
    else:
        window = spec.misfire_all_window_ms or settings.all_window_ms
        cap = spec.misfire_all_cap or settings.all_cap
        eligible = [f for f in missed if f >= now_ms - window]
        # The cap is on the newest missed fires of the whole backlog, not of this plan: when the
        # backlog continues past this plan, the eligible fires after it take their share first
        # (otherwise every plan of a long catch-up would run its own ``cap`` fires).
        later = _count_missed_after(spec.trigger, due[-1], now_ms - window, bound, cap) if more else 0
        keep = cap - later
        chosen = set(eligible[max(0, len(eligible) - keep) :]) if keep > 0 else set()
        for f in missed:
            if f in chosen:
                decided.append((f, pb.FIRED, f"{lateness}; run late (misfire=all)"))
            elif f < now_ms - window:
                decided.append(
                    (f, pb.SKIPPED_MISFIRE, f"older than the {window // 1000}s window (misfire=all)")
                )
            else:
                decided.append((f, pb.SKIPPED_MISFIRE, f"beyond the cap of {cap} late runs (misfire=all)"))
    decided += [(f, pb.FIRED, "") for f in ontime]
    out = pb.TaskFires(task=spec.name, version=version)
    for nominal, outcome, reason in decided:
        prev = out.fires[-1] if out.fires else None
        if prev is not None and outcome != pb.FIRED and prev.outcome == outcome and prev.reason == reason:
            prev.through_ms = nominal
            prev.count += 1
            continue
        out.fires.add(nominal_ms=nominal, outcome=outcome, reason=reason, count=1)
    if more:
        out.watermark_ms = due[-1]
        out.next_fire_ms = t
    else:
        out.watermark_ms = now_ms
        out.next_fire_ms = t
    return out
