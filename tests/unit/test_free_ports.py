"""free_ports hands out ports the kernel never assigns by itself, so nothing takes them between
allocation and a node's bind, or while a killed node is down."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from raftsched.testing import cluster as localcluster
from raftsched.testing.cluster import free_ports


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low = localcluster._ephemeral_low()
    if low is None or low <= 11000:
        pytest.skip("no usable ephemeral range on this machine")
    first, second = free_ports(20), free_ports(20)
    ports = first + second
    assert len(set(ports)) == 40, "a port was handed out twice"
    assert all(10000 <= p < low for p in ports)
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))


def test_a_port_that_is_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        monkeypatch.setattr(localcluster, "_ephemeral_low", lambda: busy + 1)
        monkeypatch.setattr(localcluster, "_handed_out", set(range(10000, busy)))
        with pytest.raises(RuntimeError, match="no 1 free ports"):
            free_ports(1)


def test_without_a_known_range_ports_are_os_assigned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(localcluster, "_EPHEMERAL_RANGE", tmp_path / "missing")
    assert localcluster._ephemeral_low() is None
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)


def test_each_slice_draws_only_from_its_own_part_of_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two pytest-xdist workers allocate at once and neither knows the other's ports: the slices
    # keep them apart (a port one worker handed out and not yet bound was free to the other).
    low = localcluster._ephemeral_low()
    if low is None or low <= 11000:
        pytest.skip("no usable ephemeral range on this machine")
    width = (low - 10000) // 2
    monkeypatch.setattr(localcluster, "_port_slice", {"k": 0, "n": 1})  # restored afterwards
    drawn = {}
    for k in (0, 1):
        localcluster.set_port_slice(k, 2)
        monkeypatch.setattr(localcluster, "_handed_out", set())  # as a separate process would
        drawn[k] = free_ports(50)
    assert all(10000 <= p < 10000 + width for p in drawn[0])
    assert all(10000 + width <= p < 10000 + 2 * width for p in drawn[1])


@pytest.mark.parametrize(("k", "n"), [(2, 2), (1, 0), (-1, 2), (0, 0)])
def test_a_bad_slice_is_refused(monkeypatch: pytest.MonkeyPatch, k: int, n: int) -> None:
    monkeypatch.setattr(localcluster, "_port_slice", {"k": 0, "n": 1})
    with pytest.raises(ValueError, match=f"port slice {k}/{n}: expected 0 <= k < n"):
        localcluster.set_port_slice(k, n)
    assert localcluster._port_slice == {"k": 0, "n": 1}
