"""Submission cost of large workflows: validate_workflow + compile_dag on 10,000-task DAGs.

    python -m bench.workflows [--tasks 10000] [--repeat 5] [--seed 1]

Three shapes, each with a templated command (``{{ ds }}``, ``{{ params.X }}``) per task:

* ``random``: each task depends on up to 3 random earlier tasks (conditions mixed), tasks listed
  in a shuffled order (so the topological order differs from the spec order);
* ``chain``: t0 → t1 → ... → t9999 (longest path; the cycle search's worst depth);
* ``fanout``: one root with 9,999 children (the widest out-degree).

Prints the best and the median of ``--repeat`` runs for each phase (validate, compile, both) per
shape; the target is ≤ 1 s for validate + compile of 10,000 tasks. Pure CPU: no cluster needed.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time
from collections.abc import Callable

from bench.common import Provenance
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import compile_dag
from raftsched.workflow.validate import validate_workflow

CONDITIONS = (pb.ON_SUCCESS, pb.ON_SUCCESS, pb.ON_FAILURE, pb.ON_DONE)


def _base(name: str) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=name, params_json='{"target": "warehouse"}', max_parallel=64)
    spec.schedule.expr = "30 2 * * *"
    spec.schedule.timezone = "Europe/Berlin"
    return spec


def _add(spec: pb.WorkflowSpec, i: int) -> pb.WorkflowTaskSpec:
    return spec.tasks.add(
        name=f"task-{i:05d}",
        command=f"sh -c 'echo {i} {{{{ ds }}}} {{{{ params.target }}}}'",
        max_retries=2,
        timeout_ms=600_000,
    )


def random_dag(n: int, seed: int) -> pb.WorkflowSpec:
    rng = random.Random(seed)
    order = list(range(n))
    rng.shuffle(order)  # spec position -> rank; a task depends only on lower ranks
    by_rank = sorted(range(n), key=order.__getitem__)
    spec = _base("random")
    for pos in range(n):
        task = _add(spec, pos)
        rank = order[pos]
        for dep_rank in sorted(rng.sample(range(rank), min(rank, rng.randint(0, 3)))):
            task.depends_on.add(task=f"task-{by_rank[dep_rank]:05d}", condition=rng.choice(CONDITIONS))
    return spec


def chain(n: int) -> pb.WorkflowSpec:
    spec = _base("chain")
    for i in range(n):
        task = _add(spec, i)
        if i:
            task.depends_on.add(task=f"task-{i - 1:05d}")
    return spec


def fanout(n: int) -> pb.WorkflowSpec:
    spec = _base("fanout")
    _add(spec, 0)
    for i in range(1, n):
        _add(spec, i).depends_on.add(task="task-00000")
    return spec


def submit(spec: pb.WorkflowSpec) -> None:
    """What the leader does with an ApplyWorkflow: validate, then compile (the FSM caches it)."""
    validate_workflow(spec)
    compile_dag(spec)


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    shapes = {
        "random": random_dag(args.tasks, args.seed),
        "chain": chain(args.tasks),
        "fanout": fanout(args.tasks),
    }
    print(f"{args.tasks} tasks, best / median of {args.repeat} (ms); target validate+compile <= 1000 ms")
    print(f"{'shape':<8} {'edges':>7} {'validate':>17} {'compile':>17} {'both':>17}")
    worst = 0.0
    for name, spec in shapes.items():
        edges = sum(len(t.depends_on) for t in spec.tasks)
        v = timed(functools.partial(validate_workflow, spec), args.repeat)
        c = timed(functools.partial(compile_dag, spec), args.repeat)
        both = timed(functools.partial(submit, spec), args.repeat)

        def fmt(xs: list[float]) -> str:
            return f"{min(xs) * 1000:7.1f} / {statistics.median(xs) * 1000:7.1f}"

        print(f"{name:<8} {edges:>7} {fmt(v):>17} {fmt(c):>17} {fmt(both):>17}")
        worst = max(worst, statistics.median(both))
    verdict = "OK" if worst <= 1.0 else "OVER TARGET"
    print(f"worst median validate+compile: {worst * 1000:.1f} ms ({verdict})")
    print(provenance.footer())
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
