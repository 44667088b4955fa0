"""Run a cluster of real ``raftsched-node`` processes on this machine.

Used by the demo (``raftsched demo``), the integration and chaos tests and the benchmarks. Every
node is a separate Python process (``python -m raftsched.cli.node``) with its own data directory;
processes can be killed (SIGKILL), paused (SIGSTOP/SIGCONT), restarted and wiped.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import grpc

from raftsched.config.load import load_config
from raftsched.config.types import ClusterConfig
from raftsched.errors import InvalidSpec
from raftsched.security.tls import TlsConfig, node_client_tls, sync_channel
from raftsched.security.tokens import BearerInterceptor
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

T = TypeVar("T")
_log = logging.getLogger("raftsched.node")  # where the node program logged the test settings

NODE_COMMAND = (sys.executable, "-m", "raftsched.cli.node")
"""How a node process starts (the ``raftsched-node`` program, without needing it on PATH)."""

# Test-only clock faults (the chaos suite's skewed and stepped clocks): a node or executor started
# here with one of these in its environment runs through :func:`main` (``python -m
# raftsched.testing.cluster node|executor ...``), the production program with its clock offset; the
# production programs themselves read neither.
TEST_CLOCK_OFFSET_ENV = "RAFTSCHED_TEST_CLOCK_OFFSET_MS"
"""Milliseconds added to the process's clock (a node's or an executor's)."""
TEST_CLOCK_OFFSET_FILE_ENV = "RAFTSCHED_TEST_CLOCK_OFFSET_FILE"
"""A file whose content (milliseconds) steps a node's clock while it runs; ``{name}`` in it is
replaced by the node id, so one setting serves every node."""
_SKEWED = (sys.executable, "-m", "raftsched.testing.cluster")


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()

_port_slice = {"k": 0, "n": 1}


def set_port_slice(k: int, n: int) -> None:
    """From now on, :func:`free_ports` in this process draws only from the ``k``-th of ``n``
    equal slices of its range (``0 <= k < n``), so ``n`` processes allocating at once never hand
    out the same port (each remembers only its own). The suite's ``tests/conftest.py`` calls it
    on each pytest-xdist worker (``gw0`` -> ``0, 2``, ``gw1`` -> ``1, 2``)."""
    if not 0 <= k < n:
        raise ValueError(f"port slice {k}/{n}: expected 0 <= k < n, like 0/2")
    _port_slice.update(k=k, n=n)


def _ephemeral_low() -> int | None:
    """The lowest port the kernel hands out by itself (bind to port 0, or connect), if known."""
    try:
        low, _high = (int(v) for v in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return None
    return low


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports for processes that are told their address before they start
    and are restarted on it.

    A port the OS assigned and that was then released can be taken again before its node binds
    it, or while a killed node is down: by any other socket bound to port 0 (the chaos proxies
    are) or by the local end of an outgoing connection. That once left a 5-node chaos run with a
    node that never started. So where the kernel's ephemeral range is known, ports are drawn from
    just below it, which the kernel never assigns by itself; each is checked free by binding it,
    and none is handed out twice by this process. Elsewhere they are OS-assigned.

    Processes that allocate at the same time (the suite's pytest-xdist workers) would not know
    each other's ports: each is given its own slice of the range (:func:`set_port_slice`).
    """
    k, n = _port_slice["k"], _port_slice["n"]
    low = _ephemeral_low()
    if low is None or low <= 11000:
        return _os_assigned_ports(count, host)
    ports: list[int] = []
    width = (low - 10000) // n
    candidates = list(range(10000 + k * width, 10000 + (k + 1) * width))
    random.Random().shuffle(candidates)  # tests only: distinct runs should not all probe one port
    for port in candidates:
        if len(ports) == count:
            break
        if port in _handed_out:
            continue
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        ports.append(port)
    if len(ports) < count:
        raise RuntimeError(
            f"no {count} free ports below the ephemeral range (from {low})"
            + (f" in slice {k}/{n} (set_port_slice)" if n > 1 else "")
        )
    return ports


def _os_assigned_ports(count: int, host: str) -> list[int]:
    socks, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def wait_until(
    predicate: Callable[[], T | None], timeout: float, interval: float = 0.05, what: str = "condition"
) -> T:
    """Poll ``predicate`` until it returns a truthy value; raise TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:
            last_exc = exc
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"timed out after {timeout}s waiting for {what}"
                + (f" (last error: {last_exc!r})" if last_exc else "")
            )
        time.sleep(interval)


def stop_processes(procs: Collection[subprocess.Popen[bytes]], *, resume: bool = False) -> None:
    """Terminate every live process of ``procs`` (first resuming it with SIGCONT if ``resume``:
    a stopped process would not act on SIGTERM), then reap each; one that has not exited 10 s
    later is killed."""
    for proc in procs:
        if proc.poll() is None:
            if resume:
                proc.send_signal(signal.SIGCONT)
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def write_config(
    path: Path, nodes: int, secret: str = "local-cluster-secret-0123456789", extra: str = ""
) -> ClusterConfig:
    ports = free_ports(nodes * 2)
    lines = ["[cluster]", 'name = "local"', f'secret = "{secret}"', ""]
    for i in range(nodes):
        lines += [
            "[[nodes]]",
            f'id = "n{i + 1}"',
            f'raft = "127.0.0.1:{ports[2 * i]}"',
            f'grpc = "127.0.0.1:{ports[2 * i + 1]}"',
            f'data_dir = "data/n{i + 1}"',
            "",
        ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return load_config(path)


@dataclass
class LocalCluster:
    """Processes of one cluster described by ``config_path``.

    ``tls`` is how this class and the executors it starts dial the nodes; by default, when the
    config has ``[tls]``, its CA and the node certificate (:func:`node_client_tls`).
    """

    config_path: Path
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    token: str | None = None  # bearer token for this harness's own status calls (auth on)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    tls: TlsConfig | None = None

    def __post_init__(self) -> None:
        self.config = load_config(self.config_path)
        if self.tls is None:
            self.tls = node_client_tls(self.config)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._channels: dict[str, grpc.Channel] = {}

    @classmethod
    def create(cls, base_dir: Path, nodes: int = 3, extra_config: str = "") -> LocalCluster:
        base_dir.mkdir(parents=True, exist_ok=True)
        path = base_dir / "cluster.toml"
        write_config(path, nodes, extra=extra_config)
        return cls(path, base_dir / "logs")

    def add_node_entry(self, node_id: str, lines: Sequence[str] = ()) -> None:
        """Append a ``[[nodes]]`` entry for a node that will join the running cluster to the config
        file (default: fresh loopback ports, ``data/<id>``) and read the file again. Nodes that
        run already keep the config they started with (their status reports the difference)."""
        if not lines:
            raft, grpc_port = free_ports(2)
            lines = [
                f'raft = "127.0.0.1:{raft}"',
                f'grpc = "127.0.0.1:{grpc_port}"',
                f'data_dir = "data/{node_id}"',
            ]
        out = self.config_path.read_text().splitlines()
        last = max(i for i, line in enumerate(out) if line.strip() == "[[nodes]]")
        # A [[nodes]] table must come before the top-level tables that follow the node list.
        after = next((i for i in range(last + 1, len(out)) if out[i].lstrip().startswith("[")), len(out))
        out[after:after] = ["[[nodes]]", f'id = "{node_id}"', *lines, ""]
        self.config_path.write_text("\n".join(out) + "\n")
        self.config = load_config(self.config_path)

    # -- processes -------------------------------------------------------------------------------

    def start(
        self,
        node_id: str | None = None,
        extra_env: dict[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        """Start the node (or every node) unless it runs; ``extra_args`` go to ``raftsched-node``."""
        ids = [node_id] if node_id else [n.id for n in self.config.nodes]
        for nid in ids:
            if nid in self.procs and self.procs[nid].poll() is None:
                continue
            log = open(self.log_dir / f"{nid}.log", "ab")  # noqa: SIM115 - owned by the child
            env = {**os.environ, **self.env, **(extra_env or {})}
            skewed = TEST_CLOCK_OFFSET_ENV in env or TEST_CLOCK_OFFSET_FILE_ENV in env
            command = (*_SKEWED, "node") if skewed else NODE_COMMAND
            self.procs[nid] = subprocess.Popen(
                [*command, "--config", str(self.config_path), "--node-id", nid, *extra_args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
            log.close()

    def start_executor(
        self,
        name: str,
        slots: int = 4,
        data_dir: Path | None = None,
        log: Path | None = None,
        token: str | None = None,
        env: Mapping[str, str] | None = None,
        extra: Sequence[str] = (),
    ) -> subprocess.Popen[bytes]:
        """Start an executor process (``python -m raftsched.executor``) dialling this cluster,
        with ``env`` added to its environment; ``extra``: more of its options (``--cpu 4
        --memory 8GiB --label gpu=true``).

        The caller owns the process (stop it before :meth:`stop`)."""
        data = data_dir or self.log_dir.parent / name
        out = open(log or self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        environ = {
            **os.environ,
            **self.env,
            **({"RAFTSCHED_TOKEN": token} if token else {}),
            **(env or {}),
        }
        command = (
            (*_SKEWED, "executor")
            if TEST_CLOCK_OFFSET_ENV in environ
            else (sys.executable, "-m", "raftsched.executor")
        )
        try:
            return subprocess.Popen(
                [
                    *command,
                    "--cluster",
                    ",".join(self.targets()),
                    "--name",
                    name,
                    "--slots",
                    str(slots),
                    "--data-dir",
                    str(data),
                    *self.tls_arguments(),
                    *extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environ,
            )
        finally:
            out.close()

    def tls_arguments(self) -> list[str]:
        """``--tls-ca/--tls-cert/--tls-key`` for a program dialling this cluster as this class does."""
        tls = self.tls
        if tls is None:
            return []
        out: list[str] = []
        for flag, path in (
            ("--tls-ca", tls.ca_file),
            ("--tls-cert", tls.cert_file),
            ("--tls-key", tls.key_file),
        ):
            if path is not None:
                out += [flag, str(path)]
        return out

    def kill(self, node_id: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.get(node_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                proc.wait(timeout=30)
        self._drop_channel(node_id)

    def pause(self, node_id: str) -> None:
        self.procs[node_id].send_signal(signal.SIGSTOP)

    def resume(self, node_id: str) -> None:
        self.procs[node_id].send_signal(signal.SIGCONT)

    def wipe(self, node_id: str) -> None:
        shutil.rmtree(self.config.node(node_id).data_dir, ignore_errors=True)

    def alive(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.poll() is None]

    def stop(self) -> None:
        stop_processes(self.procs.values(), resume=True)
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- observation -----------------------------------------------------------------------------

    def grpc_of(self, node_id: str) -> str:
        """The gRPC address clients and executors dial (through a proxy, if one is configured)."""
        return self.config.node(node_id).grpc

    def admin_of(self, node_id: str) -> str:
        """The address this class observes a node at: its ``grpc_bind`` when it has one, so status
        polls take the operator's direct path, never a proxy the chaos suite may have cut."""
        return self.config.node(node_id).grpc_listen

    def targets(self) -> list[str]:
        return self.config.grpc_targets()

    def _stub(self, node_id: str) -> pb_grpc.AdminStub:
        ch = self._channels.get(node_id)
        if ch is None:
            # Short reconnect backoff: nodes are killed and restarted all the time here.
            ch = sync_channel(
                self.admin_of(node_id),
                self.tls,
                [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)],
            )
            if self.token:
                ch = grpc.intercept_channel(ch, BearerInterceptor(self.token))
            self._channels[node_id] = ch
        return pb_grpc.AdminStub(ch)  # generated, untyped

    def _drop_channel(self, node_id: str) -> None:
        ch = self._channels.pop(node_id, None)
        if ch is not None:
            ch.close()

    def status(
        self,
        node_id: str,
        timeout: float = 2.0,
        lateness_since_ms: int = 0,
        digest: bool = False,
        chain_at_index: int = 0,
    ) -> pb.NodeStatusReply:
        reply: pb.NodeStatusReply = self._stub(node_id).NodeStatus(
            pb.NodeStatusRequest(
                lateness_since_ms=lateness_since_ms, include_digest=digest, chain_at_index=chain_at_index
            ),
            timeout=timeout,
        )
        return reply

    def leader(self, among: list[str] | None = None) -> str | None:
        """The node that says it leads, if every reachable node agrees on it."""
        votes = set()
        for nid in among or self.alive():
            try:
                st = self.status(nid, timeout=1.0)
            except grpc.RpcError:
                continue
            if st.role == "leader":
                votes.add(nid)
        return votes.pop() if len(votes) == 1 else None

    def wait_for_leader(self, timeout: float = 30.0, among: list[str] | None = None) -> str:
        return wait_until(lambda: self.leader(among), timeout, 0.05, "a leader")

    def wait_converged(self, timeout: float = 30.0, nodes: list[str] | None = None) -> str:
        """Wait until the given (default: live) nodes report the same applied index and digest."""

        def same() -> str | None:
            sts = [self.status(n, timeout=30, digest=True) for n in nodes or self.alive()]
            if len({(s.applied_index, s.state_digest) for s in sts}) == 1:
                return sts[0].state_digest
            return None

        return wait_until(same, timeout, 0.5, "replicas to converge")

    def chains_agree(self, nodes: list[str] | None = None, timeout: float = 30.0) -> tuple[int, str]:
        """Compare the apply-chain hash of every node at one log index (works under load).

        Returns ``(index, chain)``; raises AssertionError if two replicas applied different
        histories up to that index.
        """
        ids = nodes or self.alive()
        index = min(self.status(n, timeout=10).applied_index for n in ids)

        def at_index() -> dict[str, str] | None:
            got = {n: self.status(n, timeout=10, chain_at_index=index).chain_at_index for n in ids}
            return got if all(got.values()) else None

        chains = wait_until(at_index, timeout, 0.2, f"every node to report its chain at index {index}")
        if len(set(chains.values())) != 1:
            raise AssertionError(f"replicas disagree at index {index}: {chains}")
        return index, next(iter(chains.values()))


def skewed_clock(what: str, name: str) -> SystemClock:
    """The clock of a process started with a test clock fault: :data:`TEST_CLOCK_OFFSET_ENV`
    and, for a node, :data:`TEST_CLOCK_OFFSET_FILE_ENV`. ``what`` names the process in the
    warning it logs; ``name`` is its node id or executor name. Raises InvalidSpec (the program
    exits 2) for an offset that is not a whole number of milliseconds."""
    raw = os.environ.get(TEST_CLOCK_OFFSET_ENV, "")
    offset = 0
    if raw:
        try:
            offset = int(raw)
        except ValueError:
            raise InvalidSpec(
                TEST_CLOCK_OFFSET_ENV, f"{raw!r} is not an integer number of milliseconds"
            ) from None
        _log.warning("TEST SETTING: this %s's clock is skewed by %+d ms", what, offset)
    raw_file = os.environ.get(TEST_CLOCK_OFFSET_FILE_ENV, "") if what == "node" else ""
    path = Path(raw_file.replace("{name}", name)) if raw_file else None
    if path is not None:
        _log.warning("TEST SETTING: this %s's clock follows the offset in %s", what, path)
    return SystemClock(offset, path)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m raftsched.testing.cluster node|executor ARGS``: ``raftsched-node`` or
    ``raftsched-executor`` with ARGS, on a clock with the test faults of its environment."""
    program, *args = list(sys.argv[1:] if argv is None else argv) or [""]
    if program == "node":
        from raftsched.cli.node import node_main

        return node_main(args, clock_for=functools.partial(skewed_clock, "node"))
    if program == "executor":
        from raftsched.cli.executor import executor_main

        return executor_main(args, clock_for=functools.partial(skewed_clock, "executor"))
    print("usage: python -m raftsched.testing.cluster node|executor ARGS", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
