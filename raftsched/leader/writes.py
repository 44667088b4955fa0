"""Client writes as the leader stamps them: validation against croniter and the clock, the first
fire computed here (never in apply), and the leader's ``now`` and ``epoch`` attached.

Used by the gRPC servicer on the leader and by the simulation harness, so both produce the
same commands. Raises :class:`raftsched.errors.InvalidSpec` or ``NotFound`` for bad input before
anything is proposed.
"""

from __future__ import annotations

from raftsched import codec
from raftsched.errors import InvalidSpec, NotFound
from raftsched.fsm.state import SchedulerState
from raftsched.model import TaskSpec, validate_name, validate_params
from raftsched.timing.schedule import next_fire_after, prepare_spec
from raftsched.v1 import raftsched_pb2 as pb


def _envelope(now_ms: int, epoch: int, origin: str, key: str) -> pb.Command:
    return pb.Command(epoch=epoch, now_ms=now_ms, origin=origin, idempotency_key=key)


def create_task(spec: TaskSpec, *, disabled: bool, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    spec, first = prepare_spec(spec, now_ms)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.create_task.spec.CopyFrom(codec.spec_to_pb(spec))
    cmd.create_task.next_fire_ms = first
    cmd.create_task.disabled = disabled
    return codec.encode_command(cmd)


def update_task(
    state: SchedulerState,
    spec: TaskSpec,
    *,
    expected_version: int,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    current = state.get_task(spec.name)
    if current is None:
        raise NotFound(f"task {spec.name!r} does not exist")
    spec, _ = prepare_spec(spec, now_ms)
    # Fires up to max(now, watermark) are accounted under the old definition; the new trigger
    # takes over strictly after that.
    after = max(now_ms, current.watermark_ms)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.update_task.spec.CopyFrom(codec.spec_to_pb(spec))
    cmd.update_task.next_fire_ms = next_fire_after(spec.trigger, after)
    cmd.update_task.expected_version = expected_version
    return codec.encode_command(cmd)


def set_enabled(
    state: SchedulerState, name: str, enabled: bool, *, now_ms: int, epoch: int, origin: str, key: str
) -> bytes:
    validate_name(name)
    planning = state.get_task(name)
    if planning is None:
        raise NotFound(f"task {name!r} does not exist")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.set_enabled.name = name
    cmd.set_enabled.enabled = enabled
    if enabled:
        spec = codec.spec_from_pb(planning.spec)
        cmd.set_enabled.next_fire_ms = next_fire_after(spec.trigger, max(now_ms, planning.watermark_ms))
    return codec.encode_command(cmd)


def delete_task(name: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    validate_name(name)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.delete_task.name = name
    return codec.encode_command(cmd)


def trigger_now(name: str, params_json: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    validate_name(name)
    validate_params(params_json)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.trigger_now.name = name
    cmd.trigger_now.params_json = params_json
    return codec.encode_command(cmd)


MAX_BULK_ENTRY_BYTES = 60_000


def create_tasks(
    items: list[tuple[TaskSpec, bool]], *, now_ms: int, epoch: int, origin: str, key: str
) -> tuple[list[bytes], dict[int, InvalidSpec]]:
    """Bulk create: ``(commands, refused)``. Items that fail validation on the leader are returned
    in ``refused`` (by position) and never proposed; the rest are packed into CreateTasks
    commands below the log-entry size limit, each with idempotency key ``key/<n>``."""
    refused: dict[int, InvalidSpec] = {}
    commands: list[bytes] = []
    cmd = _envelope(now_ms, epoch, origin, f"{key}/0")
    size = 0
    for position, (spec, disabled) in enumerate(items):
        try:
            spec, first = prepare_spec(spec, now_ms)
        except InvalidSpec as exc:
            refused[position] = exc
            continue
        item = pb.CreateTask(spec=codec.spec_to_pb(spec), next_fire_ms=first, disabled=disabled)
        item_size = item.ByteSize() + 8
        if cmd.create_tasks.items and size + item_size > MAX_BULK_ENTRY_BYTES:
            commands.append(codec.encode_command(cmd))
            cmd = _envelope(now_ms, epoch, origin, f"{key}/{len(commands)}")
            size = 0
        cmd.create_tasks.items.append(item)
        size += item_size
    if cmd.create_tasks.items:
        commands.append(codec.encode_command(cmd))
    return commands, refused


def retry_run(run_id: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    if not run_id or "@" not in run_id or len(run_id) > 256:
        raise InvalidSpec("run_id", f"{run_id!r} is not a run id (task@nominal_ms)")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.retry_run.run_id = run_id
    return codec.encode_command(cmd)
