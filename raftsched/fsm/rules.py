"""Refusals shared by the task and workflow commands of the state machine.

A :class:`Reject` aborts the command being applied before it mutates anything; ``apply`` turns it
into a rejection value (``ok=False, code, message``) on every replica.
"""

from __future__ import annotations

from raftsched.fsm.effects import Effect, FiresWanted
from raftsched.fsm.records import TaskState


class Reject(Exception):
    """Abort the current command with a rejection (raised before any mutation). ``effects``: what
    the rejection tells the leader (:class:`FiresWanted`); they change no state."""

    def __init__(self, code: str, message: str, effects: tuple[Effect, ...] = ()) -> None:
        self.code = code
        self.message = message
        self.effects = effects


def check_next_fire(next_fire_ms: int, watermark_ms: int) -> None:
    """``watermark_ms`` is the task's watermark once the command applies.

    A next fire at or before it could never be accounted (every batch for it is refused as "not
    after the watermark"), so the task would silently stop firing: refuse the command instead. It
    happens when the stamping clock is behind the committed leader time; a retry restamps it.
    """
    if next_fire_ms < 0:
        raise Reject("invalid_argument", f"next fire {next_fire_ms} is negative")
    if next_fire_ms and next_fire_ms <= watermark_ms:
        # "unavailable": transient, and the SDK retries it (the retry is stamped afresh).
        raise Reject(
            "unavailable",
            f"next fire {next_fire_ms} is not after the task's watermark {watermark_ms} "
            "(stamped by a clock behind the committed leader time); retry",
        )


def check_nothing_due(st: TaskState, now: int) -> None:
    """Refuse to disable or redefine an enabled task while fires are due but not yet accounted.

    Disabling (then enabling) or updating moves the watermark to "now" without a fire record, so
    fires already due under the current definition — e.g. the backlog a new leader has not
    planned yet on its first tick — would vanish silently (invariant 1). The leader accounts them
    on its next tick, and at once when its planning is held for the dispatch backlog (the
    rejection's :class:`FiresWanted`); the refusal is transient ("unavailable", retried by the
    SDK).
    """
    if st.enabled and st.next_fire_ms and st.next_fire_ms <= now:
        raise Reject(
            "unavailable",
            f"task {st.spec.name!r} has a fire due at {st.next_fire_ms} that the leader has not "
            f"accounted yet (now {now}); retry shortly",
            (FiresWanted(st.spec.name),),
        )
