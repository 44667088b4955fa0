"""The executor's reaper: a small process that kills the commands of an executor that died.

A task's command runs in its own process group (its own session), so nothing ties it to the
executor that started it: an executor killed with SIGKILL (or by the OOM killer, or a crash) would
leave it running as an orphan while the leader, once the executor's lease expires, runs the
attempt again elsewhere - two copies of one attempt at once. The reaper closes that gap.

:class:`raftsched.executor.commands.SubprocessRunner` starts one reaper per executor (before its
first command is forked), in a session of its own (a signal to the executor's process group does
not reach it), and keeps the write end of a pipe to the reaper's stdin. For each command it writes
``+PGID`` once the process exists and ``-PGID`` once the attempt is over. When the executor
process ends - in any way, SIGKILL included - the kernel closes that pipe, the reaper reads
end-of-file, sends SIGTERM to every process group still registered, waits the grace given as its
argument, sends SIGKILL to the groups still alive, and exits. A normal stop closes the pipe with
nothing registered: the reaper just exits.

It works wherever a pipe reports end-of-file when its writer dies (Linux, macOS, the BSDs). A
command is registered by the executor's event loop right after it starts, which under load can
take hundreds of milliseconds; an executor that dies in that window leaves a command the reaper
does not know. On Linux the reaper closes that window too: every command's environment carries
``RAFTSCHED_REAPER_TOKEN`` (a random token of its runner), and at end-of-file the reaper also ends
the process groups of the processes in ``/proc`` that carry it. Elsewhere the window stays.

Run as a script (``python -I -S reaper.py GRACE_S TOKEN``): it imports the standard library only, so it
starts fast and never loads the executor's own modules.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

_POLL_S = 0.05


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def reap(groups: set[int], grace_s: float) -> None:
    """SIGTERM every group, wait up to ``grace_s`` for them to empty, SIGKILL the rest."""
    for pgid in sorted(groups):
        _signal(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in groups) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    for pgid in sorted(groups):
        if _alive(pgid):
            _signal(pgid, signal.SIGKILL)


def carrying(token: str) -> set[int]:
    """Linux (``/proc``): the process groups of this user's processes whose environment holds
    ``RAFTSCHED_REAPER_TOKEN=<token>`` (commands of the dead executor, registered or not, and their
    children). Empty where there is no ``/proc`` (macOS: registered groups only)."""
    needle = f"RAFTSCHED_REAPER_TOKEN={token}".encode()
    found: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
            if needle in environ.split(b"\0"):
                found.add(os.getpgid(int(name)))
        except OSError:
            continue  # gone, or not ours
    found.discard(os.getpgid(0))
    return found


def main(argv: list[str]) -> int:
    grace_s = float(argv[1]) if len(argv) > 1 else 5.0
    token = argv[2] if len(argv) > 2 else ""
    # Its job is to outlive the executor by a moment: a Ctrl-C or a SIGTERM meant for the
    # executor must not take it first.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.strip()
        if len(line) < 2 or line[:1] not in (b"+", b"-") or not line[1:].isdigit():
            continue
        pgid = int(line[1:])
        if pgid <= 1:
            continue
        if line[:1] == b"+":
            groups.add(pgid)
        else:
            groups.discard(pgid)
    if token:
        groups |= carrying(token)
    groups = {p for p in groups if p > 1}
    if groups:
        reap(groups, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
