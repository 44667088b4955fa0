"""Fuzz every admin and executor RPC of a fresh local 3-node cluster, longer than the suite does.

    python -m bench.fuzz --calls 5000 [--auth] [--keep] [--seed N]

First every integer field of every RPC with each of its boundary values (0, 1, -1, the type's
extremes, its documented limits +- 1; ``Fuzzer.boundary_sweep``), then random requests from the
proto descriptors (see ``tests/rpc_fuzz.py``) from a new seed on every run, printed so that a
finding can be replayed with ``--seed``; every RPC is called once per round, so ``--calls`` is
rounded up to whole rounds (the sweep's calls come on top).
``--auth`` runs the cluster with auth on and sends an admin token on most calls. Prints the calls,
the statuses by code, how many rejections were checked for "no state change", whether the
replicas' digests are equal at the end, and every problem found; exits 1 if there was one.
The cluster lives in a temporary directory, removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster
from tests.rpc_fuzz import Fuzzer, methods


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="at least this many calls (default 2000)")
    parser.add_argument("--auth", action="store_true", help="auth on, an admin token on most calls")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory (logs, data)")
    parser.add_argument("--seed", type=int, default=None, help="replay the random part of an earlier run")
    parser.add_argument("--no-sweep", action="store_true", help="skip the boundary-value sweep")
    args = parser.parse_args(argv)
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed: {seed} (replay: python -m bench.fuzz --seed {seed})", flush=True)
    rounds = max(1, math.ceil(args.calls / len(methods())))
    base = Path(tempfile.mkdtemp(prefix="raftsched-fuzz-"))
    token = None
    extra = ""
    if args.auth:
        token = new_token()
        (base / "admin.token").write_text(token + "\n")
        extra = '[auth]\nbootstrap_token_file = "admin.token"\n'
    cluster = LocalCluster.create(base, 3, extra_config=extra)
    cluster.token = token
    fuzzer = Fuzzer(cluster, token=token)
    started = time.monotonic()
    digest = ""
    try:
        cluster.start()
        cluster.wait_for_leader()
        if not args.no_sweep:
            fuzzer.boundary_sweep()
        fuzzer.rounds(rounds, seed=seed)
        digest = fuzzer.finish()
    finally:
        fuzzer.close()
        cluster.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(f"calls: {fuzzer.calls} in {elapsed:.1f} s ({rounds} rounds over {len(methods())} RPCs)")
    for code, count in sorted(fuzzer.by_code.items()):
        print(f"  {code:20} {count}")
    checked, unchecked = fuzzer.rejected_checked, fuzzer.rejected_unchecked
    print(f"rejections checked for no state change: {checked} (unchecked: {unchecked})")
    print(f"digests equal: {'yes ' + digest[:16] if digest else 'NO'}")
    print(f"pysyncobj truncation notices (known library noise): {fuzzer.library_noise}")
    if args.keep:
        print(f"cluster directory: {base}")
    print(f"boundary values sent: {len(fuzzer.boundaries_sent)}; seed: {seed}")
    for problem in fuzzer.problems:
        print(f"PROBLEM {problem}")
    print(provenance.footer())
    return 1 if fuzzer.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
