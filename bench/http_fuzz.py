"""The schemathesis run of the HTTP/JSON API, longer than the suite's.

    python -m bench.http_fuzz [--examples 40]

Runs tests/integration/test_http_schemathesis.py (a live 3-node cluster, every operation of the
OpenAPI document but membership changes and event streams, valid and invalid requests; no 5xx,
answers as documented, replicas equal afterwards) with ``--examples`` examples per operation
instead of the suite's 4, and prints pytest's summary and the time it took.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from bench.common import REPO, Provenance


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=40, help="examples per operation")
    args = ap.parse_args()
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    env = {**os.environ, "RAFTSCHED_HTTP_FUZZ_EXAMPLES": str(args.examples)}  # PYTHONPATH: bench.common
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--timeout",
            "3600",
            str(REPO / "tests" / "integration" / "test_http_schemathesis.py"),
        ],
        cwd=REPO,
        env=env,
        check=False,
    )
    print(
        f"{args.examples} examples per operation: exit {done.returncode}, {time.monotonic() - started:.0f} s"
    )
    print(provenance.footer())
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
