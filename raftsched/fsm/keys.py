"""Key layout of the replicated state in the store. Every key is bytes; order matters for scans.

==========================================  ===================================================
``m/meta``                                  :class:`Meta` (max epoch, max leader now, counters)
``t/<task>``                                TaskRecord
``r/<task>\\x00<nominal:016x>[~m<seq>]``    Run (active and retained finished runs)
``a/<task>\\x00<nominal:016x>``             FireRecord (fire accounting)
``i/<idempotency key>``                     CommandResult of the first command with that key
``j/<now:016x>/<idempotency key>``          expiry index of idempotency keys
``e/<executor>``                            ExecutorRecord (membership)
``v/<task>\\x00<version:08x>``              TaskRecord{spec} of each recent version
``x/<seq:016x>``                            AlertRecord (the alert outbox, in delivery order)
``xd/<target>``                             AlertCursor (a webhook target's delivered cursor)
``xu/<dedupe key>``                         empty: a leader-raised alert with this key exists
``w/<workflow>``                            WorkflowRecord
``y/<workflow>\\x00<version:08x>``          WorkflowSpec of each version (runs pin theirs)
``q/<workflow>\\x00<logical:016x>[~m|~b<seq>]`` WorkflowRun (active and retained finished ones)
``b/<workflow>~b<seq>``                     BackfillRecord
``k/<token id>``                            TokenRecord (hashed secret, grant, revocation)
``ws/<workflow>``                           WorkflowStage (a big workflow's tasks being staged)
``wc/<workflow>\\x00<chunk:08x>``           WorkflowSpec holding one staged chunk of tasks
``u/<at:016x>/<seq:016x>``                  AuditRecord (one accepted write)
``o/<kind>/<name>``                         QuotaRecord (an owner's or a namespace's quota)
``cal/<calendar>``                          CalendarRecord (days, zone and its expanded offsets)
``c/members``                               MembershipRecord (the scheduler nodes)
``ev/<name>\\x00<key>``                     EventRecord (an accepted event, kept for the dedupe window)
``evx/<accepted:016x>/<name>\\x00<key>``     empty: expiry index of accepted events
``pl/<pool>``                                PoolRecord (a named capacity; its holders are on shards)
``tc/<applied:016x>``                        TaskCounters (a command's task counters, until a checkpoint)
``h/<applied:016x>``                         HotFires (a FireColumns entry's accepted rows, raftsched.fsm.hot)
``ha/<applied:016x>``                        HotAssigns (an AssignColumns entry's accepted rows)
``hf/<applied:016x>``                        HotResults (a ResultColumns entry's accepted rows)
``hp/<applied:016x>``                        HotPromoted (the hot runs a command promoted, once logged)
``hc/s``                                     HotCheckpoint (the live hot slots at the last hot checkpoint)
``~...``                                    node-local (applied index); never part of a snapshot
==========================================  ===================================================

Task names cannot contain ``\\x00``, so ``<task>\\x00`` is a unique prefix per task.
"""

from __future__ import annotations

from functools import lru_cache

META = b"m/meta"
TASK = b"t/"
RUN = b"r/"
FIRE = b"a/"
IDEM = b"i/"
IDEM_EXPIRY = b"j/"
EXECUTOR = b"e/"
VERSION = b"v/"
ALERT = b"x/"
ALERT_CURSOR = b"xd/"
ALERT_DEDUPE = b"xu/"
WORKFLOW = b"w/"
WORKFLOW_VERSION = b"y/"
WORKFLOW_RUN = b"q/"
BACKFILL = b"b/"
TOKEN = b"k/"
AUDIT = b"u/"
QUOTA = b"o/"
STAGE = b"ws/"
STAGE_CHUNK = b"wc/"
CALENDAR = b"cal/"
MEMBERSHIP = b"c/"
WORKFLOW_ZONE = b"yz/"  # a workflow version's zone offsets (wall-clock not_before gates)
MEMBERSHIP_KEY = MEMBERSHIP + b"members"
EVENT = b"ev/"
EVENT_EXPIRY = b"evx/"
POOL = b"pl/"
TASK_COUNTERS = b"tc/"  # a command's task counters (TaskCounters), until the next checkpoint
# The columnar hot path (raftsched.fsm.hot): one record per accepted entry, keyed by the entry's
# Meta.applied_commands (so a replay merges the three in log order), until the next hot checkpoint.
HOT_FIRES = b"h/"
HOT_ASSIGNS = b"ha/"
HOT_RESULTS = b"hf/"
HOT_PROMOTED = b"hp/"  # the seqs a command promoted to the cold path (Meta.promotions_logged)
HOT_CHECKPOINT = b"hc/"
HOT_SLOTS_KEY = HOT_CHECKPOINT + b"s"
LOCAL_PREFIX = b"~"
END = b"\xff"


def hot_key(prefix: bytes, applied_commands: int) -> bytes:
    """The key of a hot entry's record (``prefix``: :data:`HOT_FIRES`, ...)."""
    return prefix + b"%016x" % applied_commands


def task_key(name: str) -> bytes:
    return TASK + name.encode()


def task_prefix_end() -> bytes:
    return b"t0"  # "0" sorts right after "/"


def counters_key(applied_commands: int) -> bytes:
    """The key of the task counters record of the command that made ``applied_commands``
    accepted commands (key order: apply order)."""
    return TASK_COUNTERS + f"{applied_commands:016x}".encode()


def calendar_key(name: str) -> bytes:
    return CALENDAR + name.encode()


def per_task_prefix(kind: bytes, task: str) -> bytes:
    return kind + task.encode() + b"\x00"


def per_task_end(kind: bytes, task: str) -> bytes:
    return kind + task.encode() + b"\x01"


def time_key(kind: bytes, task: str, nominal_ms: int, suffix: str = "") -> bytes:
    return kind + task.encode() + b"\x00" + _hex16(nominal_ms) + (suffix.encode() if suffix else b"")


@lru_cache(maxsize=256)
def _hex16(ms: int) -> bytes:
    # Every fire formats its nominal time twice (run and fire keys), and the tasks of one batch
    # share their nominal times.
    return f"{ms:016x}".encode()


def run_key_for_id(run_id: str) -> bytes:
    """``task@nominal[~mN]`` → its run key."""
    task, _, rest = run_id.rpartition("@")
    nominal, _, manual = rest.partition("~")
    return time_key(RUN, task, int(nominal), f"~{manual}" if manual else "")


def idem_key(key: str) -> bytes:
    return IDEM + key.encode()


def idem_expiry_key(now_ms: int, key: str) -> bytes:
    return IDEM_EXPIRY + f"{now_ms:016x}/".encode() + key.encode()


def executor_key(name: str) -> bytes:
    return EXECUTOR + name.encode()


def alert_key(seq: int) -> bytes:
    return ALERT + f"{seq:016x}".encode()


def alert_cursor_key(target: str) -> bytes:
    return ALERT_CURSOR + target.encode()


def alert_dedupe_key(dedupe: str) -> bytes:
    return ALERT_DEDUPE + dedupe.encode()


def version_key(task: str, version: int) -> bytes:
    return VERSION + task.encode() + b"\x00" + f"{version:08x}".encode()


def workflow_key(name: str) -> bytes:
    return WORKFLOW + name.encode()


def workflow_version_key(name: str, version: int) -> bytes:
    return WORKFLOW_VERSION + name.encode() + b"\x00" + f"{version:08x}".encode()


def workflow_zone_key(name: str, version: int) -> bytes:
    return WORKFLOW_ZONE + name.encode() + b"\x00" + f"{version:08x}".encode()


def stage_key(workflow: str) -> bytes:
    return STAGE + workflow.encode()


def stage_chunk_key(workflow: str, chunk: int) -> bytes:
    return STAGE_CHUNK + workflow.encode() + b"\x00" + f"{chunk:08x}".encode()


def workflow_run_key(run_id: str) -> bytes:
    """``workflow@logical[~mN|~bN]`` → its key (same layout as task runs)."""
    workflow, _, rest = run_id.rpartition("@")
    logical, _, suffix = rest.partition("~")
    return time_key(WORKFLOW_RUN, workflow, int(logical), f"~{suffix}" if suffix else "")


def backfill_key(backfill_id: str) -> bytes:
    return BACKFILL + backfill_id.encode()


def run_id_from_key(kind: bytes, key: bytes) -> str:
    """Inverse of :func:`time_key` for run keys: ``<kind><name>\\x00<nominal:016x>[~suffix]`` → run id."""
    name, _, rest = key[len(kind) :].partition(b"\x00")
    nominal, suffix = rest[:16], rest[16:]
    return f"{name.decode()}@{int(nominal, 16)}{suffix.decode()}"


def token_key(token_id: str) -> bytes:
    return TOKEN + token_id.encode()


def audit_key(at_ms: int, seq: int) -> bytes:
    return AUDIT + f"{max(at_ms, 0):016x}/{seq:016x}".encode()


def quota_key(kind: str, name: str) -> bytes:
    return QUOTA + kind.encode() + b"/" + name.encode()


def event_key(name: str, key: str) -> bytes:
    return EVENT + name.encode() + b"\x00" + key.encode()


def event_expiry_key(accepted_ms: int, name: str, key: str) -> bytes:
    return EVENT_EXPIRY + f"{accepted_ms:016x}/".encode() + name.encode() + b"\x00" + key.encode()


def pool_key(name: str) -> bytes:
    return POOL + name.encode()
