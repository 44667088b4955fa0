"""``raftsched apply FILE...``: make the cluster's plain tasks match task files (YAML or TOML).

Each task the files declare is created, updated or left unchanged, and one line per task says
which; ``--prune`` also deletes the tasks of the files' namespaces that no file lists. Updates
are conditional on the version read, so a concurrent change is a conflict, not a lost write.
Applying the same files twice reports every task unchanged.

``--dry-run`` contacts no cluster: it prints what applying would do, field by field, against
the files given with ``--against`` (e.g. the version under review's base, ``git show
main:tasks.yaml > base.yaml``), or against nothing (everything is created). ``--plan`` prints the
same against the live cluster without changing it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from raftsched import codec
from raftsched.cli.cluster import connect
from raftsched.cli.render import print_json
from raftsched.errors import RaftschedError
from raftsched.model import TaskSpec
from raftsched.workflow.taskfiles import (
    FieldChange,
    InvalidTaskFile,
    TaskFile,
    diff_specs,
    load_task_file,
    normalize_for,
)

__all__ = ["Step", "cmd_apply", "load_files", "plan"]


@dataclass(frozen=True, slots=True)
class Step:
    """What applying does to one task: ``created`` / ``updated`` / ``unchanged`` / ``deleted``."""

    action: str
    name: str
    where: str  # file:line of its declaration ("" for a deletion)
    spec: TaskSpec | None  # the spec to write (None for a deletion)
    version: int = 0  # the version read (updates are conditional on it)
    changes: list[FieldChange] = field(default_factory=list)


def load_files(paths: list[str]) -> list[TaskFile]:
    """Every file parsed; all problems of all files reported at once, and a task declared in two
    files refused (with both places)."""
    files: list[TaskFile] = []
    problems: list[tuple[str, str]] = []
    for path in paths:
        try:
            files.append(load_task_file(path))
        except InvalidTaskFile as bad:
            problems.extend(bad.problems)
    seen: dict[str, str] = {}
    for tf in files:
        for spec, where in tf.tasks:
            if spec.name in seen:
                problems.append((where, f"task {spec.name!r} is also declared at {seen[spec.name]}"))
            else:
                seen[spec.name] = where
    if problems:
        raise InvalidTaskFile(problems, ", ".join(paths))
    return files


def plan(files: list[TaskFile], current: dict[str, tuple[TaskSpec, int]], prune: bool) -> list[Step]:
    """The steps that make ``current`` (name → (spec, version)) match ``files``: declared tasks in
    file order, then deletions (with ``prune``) in name order."""
    steps: list[Step] = []
    declared: set[str] = set()
    for tf in files:
        for spec, where in tf.tasks:
            declared.add(spec.name)
            existing = current.get(spec.name)
            if existing is None:
                steps.append(Step("created", spec.name, where, spec, 0, diff_specs(None, spec)))
                continue
            old, version = existing
            new = normalize_for(spec, old)
            changes = diff_specs(old, new)
            steps.append(Step("updated" if changes else "unchanged", spec.name, where, new, version, changes))
    if prune:
        namespaces = set().union(*(tf.namespaces for tf in files)) if files else set()
        for name in sorted(current):
            old, version = current[name]
            if name not in declared and old.namespace in namespaces:
                steps.append(Step("deleted", name, "", None, version))
    return steps


def cmd_apply(args: argparse.Namespace) -> int:
    files = load_files(args.files)
    if args.dry_run:
        baseline = load_files(args.against) if args.against else []
        current = {spec.name: (spec, 0) for tf in baseline for spec, _ in tf.tasks}
        return _report(plan(files, current, args.prune), args, dry=True)
    with connect(args) as client:
        current = {
            rec.spec.name: (codec.stored_spec_from_pb(rec.spec), rec.version) for rec in client.list_tasks()
        }
        steps = plan(files, current, args.prune)
        if args.plan:
            return _report(steps, args, dry=True)
        failed: dict[str, str] = {}
        for step in steps:
            try:
                if step.action == "created" and step.spec is not None:
                    client.add_task(step.spec)
                elif step.action == "updated" and step.spec is not None:
                    client.update_task(step.spec, expected_version=step.version)
                elif step.action == "deleted":
                    client.delete_task(step.name)
            except RaftschedError as exc:
                failed[step.name] = f"{exc.code}: {exc}"
    return _report(steps, args, dry=False, failed=failed)


def _report(
    steps: list[Step], args: argparse.Namespace, *, dry: bool, failed: dict[str, str] | None = None
) -> int:
    failed = failed or {}
    if args.json:
        out: list[dict[str, Any]] = [
            {
                "task": s.name,
                "action": s.action,
                "where": s.where,
                "changes": [{"field": c.field, "old": c.old, "new": c.new} for c in s.changes],
                **({"error": failed[s.name]} if s.name in failed else {}),
            }
            for s in steps
        ]
        print_json({"dry_run": dry, "tasks": out})
        return 1 if failed else 0
    width = max((len(s.name) for s in steps), default=0)
    verb = {"created": "create", "updated": "update", "unchanged": "unchanged", "deleted": "delete"}
    for s in steps:
        action = verb[s.action] if dry else s.action
        if s.name in failed:
            print(f"failed    {s.name:<{width}}  {failed[s.name]}")
            continue
        where = f"  ({s.where})" if s.where else ""
        print(f"{action:<9} {s.name:<{width}}{where}".rstrip())
        if s.action == "updated" or (dry and s.action == "created"):
            for c in s.changes:
                if s.action == "created":
                    print(f"    + {c.field}: {c.new}")
                else:
                    print(f"    ~ {c.field}: {c.old} -> {c.new}")
    counts = {a: sum(1 for s in steps if s.action == a and s.name not in failed) for a in verb}
    summary = ", ".join(
        f"{n} {'to ' + verb[a] if dry and a != 'unchanged' else a}" for a, n in counts.items() if n
    )
    print(
        ("dry run: " if dry else "") + (summary or "no tasks") + (f", {len(failed)} failed" if failed else "")
    )
    return 1 if failed else 0
