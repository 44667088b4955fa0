"""Settings for the whole suite.

Hypothesis's default 200 ms deadline per example is a timing check, not a property of the code:
on a shared 2-core machine, and with the suite on several pytest-xdist workers, a
descheduled process trips it (``DeadlineExceeded``, or ``Flaky`` when the retry is fast) on
examples that take microseconds. The suite's profile turns it off; every other setting, and each
test's own ``@settings`` (example counts included), stays as written.
``HYPOTHESIS_PROFILE=hypothesis-default`` runs with Hypothesis's own defaults instead.

On pytest-xdist workers (``-n 2``, what ``.ci/run`` runs), each worker draws the loopback ports
of its clusters from its own slice of ``free_ports``'s range (``RAFTSCHED_TEST_PORT_SLICE``): a
port one worker handed out, not yet bound by its node (or whose node is down for a restart), is
otherwise free in the other worker's eyes.
"""

from __future__ import annotations

import os

from hypothesis import settings

from raftsched.testing.cluster import TEST_PORT_SLICE_ENV

settings.register_profile("raftsched-suite", deadline=None)
settings.register_profile("hypothesis-default", settings.get_profile("default"))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "raftsched-suite"))

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... (unset in a serial run)
_workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
if _worker.startswith("gw") and _workers:
    os.environ[TEST_PORT_SLICE_ENV] = f"{int(_worker[2:])}/{int(_workers)}"
