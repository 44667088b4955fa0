"""The in-process hot paths of two checkouts, alternating: before and after a change in one command.

    python -m bench.ab A B [--rounds 4] [--only hotpath,executor_hotpath] [--tasks 5000]
                       [--seconds 6] [--attempts 20000] [--kind async] [--keep-count N]
                       [--fires-tasks 10000] [--json FILE]

A and B are checkouts (a git worktree each, e.g. ``git worktree add /tmp/before main``). Each
round runs, for each benchmark, A then B, each in a fresh process started in that checkout with
``PYTHONPATH`` set to it, so each side measures its own raftsched with its own copy of the
benchmark (a restructure that moves modules moves the benchmark's imports with them):

* ``hotpath``: ``bench/hotpath.py --tasks N --seconds S`` (plan + apply + commit of N
  every-second fires for S simulated seconds); the figure is ``leader_total_us_per_fire``;
* ``executor_hotpath``: ``bench/executor_hotpath.py --attempts N --kind K`` (an embedded executor);
  the figure is ``cpu_us_per_attempt``;
* ``fires`` (only when named in ``--only``): ``bench/fires.py --tasks N --seconds S`` with N from
  ``--fires-tasks`` (10,000): a real 3-node cluster with N every-second tasks and no executor; the
  figure is the commit lateness p99 in ms (wall-clock, moved by the machine's load: alternate and
  read the spread), each run also printing p50, max, fires committed/s and the leader's CPU per
  fire in µs;
* ``attempt_apply`` (only when named in ``--only``): ``bench/attempt_apply.py --tasks N --seconds S
  [--keep-count K]`` (fire, assignment and result entries applied on a leader's and a follower's
  state over LMDB); the figure is the leader's ``total_us`` per attempt. With ``--keep-count`` it
  runs at steady state (history at its keep count; take ``--seconds 65`` for a whole batch cycle).

All but ``fires`` are CPU time per item (lower is better). A checkout whose ``bench/`` is a package runs them
as ``python -m bench.<name>``; an older one, from before, as ``python bench/<name>.py`` (same
options, same figure). Each side's raftsched is checked to come from that checkout before the
first round. Prints every run, then per benchmark the minimum (the least disturbed run) and the
median of each side and B's change against A; the JSON (``--json``) has every figure and the
provenance, with each side's commit. The machine is shared: compare the sides' spread with the
difference before calling it one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Json, Provenance, checkout_state


@dataclass(frozen=True)
class Bench:
    module: str
    figure: str
    # Further figures of each run, printed beside it and kept in the JSON (not compared).
    also: tuple[str, ...] = ()
    # A run that fails is recorded (and counted per side) instead of ending the comparison: a
    # real cluster on a loaded machine can lose its leader or answer a status call too late.
    may_fail: bool = False


BENCHES = {
    "hotpath": Bench("hotpath", "leader_total_us_per_fire"),
    "executor_hotpath": Bench("executor_hotpath", "cpu_us_per_attempt"),
    "attempt_apply": Bench("attempt_apply", "leader_us_per_attempt.total_us"),
    # A real 3-node cluster, fires only (wall-clock: the machine's load moves it, alternate).
    "fires": Bench(
        "fires",
        "commit_lateness_ms.p99",
        ("commit_lateness_ms.p50", "commit_lateness_ms.max", "fires_per_s", "leader_cpu_us_per_fire"),
        may_fail=True,
    ),
}
DEFAULT = ("hotpath", "executor_hotpath")  # what runs without --only


def _env(checkout: Path) -> dict[str, str]:
    """This process's environment with PYTHONPATH set to ``checkout`` alone."""
    return {**os.environ, "PYTHONPATH": str(checkout)}


def check_checkout(checkout: Path) -> None:
    """SystemExit unless a process started as :func:`measure` starts it imports raftsched from
    ``checkout``."""
    if not (checkout / "raftsched" / "__init__.py").exists():
        raise SystemExit(f"{checkout}: no raftsched package here (give the checkout's top directory)")
    done = subprocess.run(
        [sys.executable, "-c", "import raftsched; print(raftsched.__file__)"],
        cwd=checkout,
        env=_env(checkout),
        capture_output=True,
        text=True,
        check=True,
    )
    imported = Path(done.stdout.strip()).resolve()
    if not imported.is_relative_to(checkout):
        raise SystemExit(f"{checkout}: its processes import raftsched from {imported}")


def command(checkout: Path, bench: Bench, args: list[str]) -> list[str]:
    if (checkout / "bench" / "__init__.py").exists():
        return [sys.executable, "-m", f"bench.{bench.module}", *args]
    return [sys.executable, str(checkout / "bench" / f"{bench.module}.py"), *args]


def _field(result: Any, dotted: str) -> float:
    value = result
    for part in dotted.split("."):  # a dotted figure names a nested field
        value = value[part]
    return float(value)


class RunFailed(Exception):
    """A run of a ``may_fail`` benchmark exited with an error (its last lines in the message)."""


def measure(checkout: Path, bench: Bench, args: list[str]) -> tuple[float, dict[str, float]]:
    """One run of ``bench`` in ``checkout`` (a fresh process): its figure, and its ``also``.
    :class:`RunFailed` if it failed and ``bench.may_fail``; SystemExit if it failed otherwise."""
    done = subprocess.run(
        command(checkout, bench, args),
        cwd=checkout,
        env=_env(checkout),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0 and bench.may_fail:
        lines = done.stderr.strip().splitlines()  # the last few: a gRPC error ends with a lone ">"
        raise RunFailed(" | ".join(x.strip() for x in lines[-4:]) if lines else f"exit {done.returncode}")
    if done.returncode != 0:
        raise SystemExit(f"{bench.module} in {checkout} exited {done.returncode}:\n{done.stderr[-2000:]}")
    result: Any = json.loads(done.stdout)
    return _field(result, bench.figure), {name: _field(result, name) for name in bench.also}


def summary(a: list[float], b: list[float]) -> Json:
    def change(x: float, y: float) -> float:
        return round(100 * (y - x) / x, 1)

    med_a, med_b = round(statistics.median(a), 3), round(statistics.median(b), 3)
    return {
        "a": sorted(a),
        "b": sorted(b),
        "a_min": min(a),
        "b_min": min(b),
        "a_median": med_a,
        "b_median": med_b,
        "b_vs_a_min_pct": change(min(a), min(b)),
        "b_vs_a_median_pct": change(med_a, med_b),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", type=Path, help="checkout A (before)")
    ap.add_argument("b", type=Path, help="checkout B (after)")
    ap.add_argument("--rounds", type=int, default=4, help="runs of each side per benchmark")
    ap.add_argument("--only", default=",".join(DEFAULT), help=f"comma-separated of {','.join(BENCHES)}")
    ap.add_argument("--tasks", type=int, default=5000, help="hotpath, attempt_apply: every-second tasks")
    ap.add_argument("--seconds", type=int, default=6, help="hotpath, attempt_apply: simulated seconds")
    ap.add_argument("--attempts", type=int, default=20_000, help="executor_hotpath: attempts")
    ap.add_argument("--kind", choices=["sync", "async"], default="async", help="executor_hotpath: handler")
    ap.add_argument(
        "--keep-count", type=int, default=0, help="attempt_apply: history kept per task (0: the default)"
    )
    ap.add_argument(
        "--fires-tasks", type=int, default=10_000, help="fires: every-second tasks of the 3-node cluster"
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    names = args.only.split(",")
    unknown = set(names) - set(BENCHES)
    if unknown:
        ap.error(f"--only: unknown {sorted(unknown)}; choose from {sorted(BENCHES)}")
    sides = {"a": args.a.resolve(), "b": args.b.resolve()}
    for checkout in sides.values():
        check_checkout(checkout)
    provenance = Provenance.start()
    options = {
        "hotpath": ["--tasks", str(args.tasks), "--seconds", str(args.seconds)],
        "executor_hotpath": ["--attempts", str(args.attempts), "--kind", args.kind],
        "attempt_apply": ["--tasks", str(args.tasks), "--seconds", str(args.seconds)]
        + (["--keep-count", str(args.keep_count)] if args.keep_count else []),
        "fires": ["--tasks", str(args.fires_tasks), "--seconds", str(args.seconds)],
    }
    runs: dict[str, dict[str, list[float]]] = {n: {"a": [], "b": []} for n in names}
    extras: dict[str, dict[str, list[dict[str, float]]]] = {n: {"a": [], "b": []} for n in names}
    failed: dict[str, dict[str, list[str]]] = {n: {"a": [], "b": []} for n in names}
    for r in range(args.rounds):
        for name in names:
            for side, checkout in sides.items():
                try:
                    figure, also = measure(checkout, BENCHES[name], options[name])
                except RunFailed as exc:
                    failed[name][side].append(str(exc))
                    print(f"round {r + 1}: {name} {side.upper()} FAILED: {exc}", flush=True)
                    continue
                runs[name][side].append(figure)
                extras[name][side].append(also)
                more = "".join(f", {k} {v:g}" for k, v in also.items())
                print(
                    f"round {r + 1}: {name} {side.upper()} {BENCHES[name].figure} {figure}{more}",
                    flush=True,
                )
    results = {
        name: {
            "figure": BENCHES[name].figure,
            **(summary(v["a"], v["b"]) if v["a"] and v["b"] else {"a": v["a"], "b": v["b"]}),
            **({"also": extras[name]} if BENCHES[name].also else {}),
            **({"failed": failed[name]} if failed[name]["a"] or failed[name]["b"] else {}),
        }
        for name, v in runs.items()
    }
    for name, s in results.items():
        if "failed" in s:
            print(f"{name}: failed runs: A {len(s['failed']['a'])}, B {len(s['failed']['b'])}")
        if "a_min" not in s:
            print(f"{name}: no comparison (a side has no successful run)")
            continue
        print(
            f"{name} ({s['figure']}): A min {s['a_min']} median {s['a_median']}; "
            f"B min {s['b_min']} median {s['b_median']}; "
            f"B vs A {s['b_vs_a_min_pct']:+} % (min), {s['b_vs_a_median_pct']:+} % (median)"
        )
    out = {
        "sides": {side: {"path": str(path), **checkout_state(path)} for side, path in sides.items()},
        "options": {name: options[name] for name in names},
        "rounds": args.rounds,
        "results": results,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(provenance.stamp(out), indent=2) + "\n")
    provenance.print_record()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
