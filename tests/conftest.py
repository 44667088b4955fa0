"""Settings for the whole suite.

Hypothesis's default 200 ms deadline per example is a timing check, not a property of the code:
on a shared 2-core machine, and with the suite on several pytest-xdist workers, a
descheduled process trips it (``DeadlineExceeded``, or ``Flaky`` when the retry is fast) on
examples that take microseconds. The suite's profile turns it off; every other setting, and each
test's own ``@settings`` (example counts included), stays as written.
``HYPOTHESIS_PROFILE=hypothesis-default`` runs with Hypothesis's own defaults instead.

On pytest-xdist workers (``-n 2 --dist loadscope``, what ``.ci/run`` runs):

* each worker draws the loopback ports of its clusters from its own slice of ``free_ports``'s
  range (``set_port_slice``): a port one worker handed out, not yet bound by its node
  (or whose node is down for a restart), is otherwise free in the other worker's eyes;
* a module stays on one worker (its module-scoped cluster or chaos run is made once), and all of
  ``tests/chaos/`` is one unit of work that goes first: one worker runs the chaos runs one after
  the other while the other worker runs the unit, property and simulation modules (one CPU-bound
  process), then both take the integration modules. Two chaos runs at once, or a chaos run beside
  a cluster test, is the most load a run puts on 2 cores, and the chaos runs' time budgets and
  executor liveness (3 s) are what a loaded machine trips first.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from raftsched.testing.cluster import set_port_slice

settings.register_profile("raftsched-suite", deadline=None)
settings.register_profile("hypothesis-default", settings.get_profile("default"))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "raftsched-suite"))

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... (unset in a serial run)
_workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
if _worker.startswith("gw") and _workers:
    # In this process only, not its environment: commands the executors run see their own
    # environment exactly (tests compare it).
    set_port_slice(int(_worker[2:]), int(_workers))


_CHAOS = "tests/chaos/"


def _rank(nodeid: str) -> int:
    """Where a test's module goes in a two-worker run: the chaos runs, the in-process modules,
    then the integration modules (real clusters)."""
    if nodeid.startswith(_CHAOS):
        return 0
    return 2 if nodeid.startswith("tests/integration/") else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only on xdist workers (the order the controller hands work out in); a serial run keeps
    # pytest's own order.
    if _worker.startswith("gw"):
        items.sort(key=lambda item: _rank(item.nodeid))  # stable: a module's order is kept


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadscope`` with ``tests/chaos/`` as one unit of work and the collection's own
    order (not xdist's reordering by test count): see the module docstring."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            return _CHAOS if nodeid.startswith(_CHAOS) else super()._split_scope(nodeid)

    config.option.loadscopereorder = False
    return SuiteScheduling(config, log)
