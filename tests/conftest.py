"""Settings for the whole suite.

Hypothesis's default 200 ms deadline per example is a timing check, not a property of the code:
on a shared 2-core machine, and with the suite on several pytest-xdist workers, a
descheduled process trips it (``DeadlineExceeded``, or ``Flaky`` when the retry is fast) on
examples that take microseconds. The suite's profile turns it off; every other setting, and each
test's own ``@settings`` (example counts included), stays as written.
``HYPOTHESIS_PROFILE=hypothesis-default`` runs with Hypothesis's own defaults instead.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("raftsched-suite", deadline=None)
settings.register_profile("hypothesis-default", settings.get_profile("default"))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "raftsched-suite"))
