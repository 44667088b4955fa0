"""The console's editing pages (issue 29 §8): create, edit and delete tasks and workflows, and
pause or resume a workflow (tasks are enabled and disabled on their page, :mod:`views`).

A definition is edited as the text of a file: a task file (``raftsched apply``) or a workflow
file (``raftsched workflow apply``), YAML or TOML, read by the same parsers the CLI uses, so a
problem gets the same message (``console:3: cron: ...``). An edit page starts from the stored
definition (:mod:`raftsched.workflow.export`) and carries the version it was read at; the task
or workflow is updated only if it is still at that version (the state machine checks it when it
applies the write, as for ``raftsched apply``), so a concurrent change is refused with the
``conflict`` message.

Every action is an RPC made with the session's token, so the authorization table decides; the
pages draw a button only when :meth:`Ctx.can` allows it in the object's namespace. A refused
edit re-renders the form with the text as posted and the message (status 400 or 409).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Final, Literal

from raftsched import codec
from raftsched.errors import (
    AlreadyExists,
    Conflict,
    InvalidSpec,
    NotFound,
    PermissionDenied,
    RaftschedError,
    Unauthenticated,
)
from raftsched.web.base import Ctx, Redirect, View
from raftsched.workflow.export import task_file_text, workflow_file_text
from raftsched.workflow.files import parse_workflow_text
from raftsched.workflow.taskfiles import normalize_for, parse_task_text

__all__ = ["ROUTES", "refused_status"]

SOURCE: Final = "console"
"""How the posted text is named in messages (``console:3: ...``), as a file name is in the CLI's."""

_KINDS: Final = ("task", "workflow")


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _fmt(text: str) -> Literal["yaml", "toml"]:
    return "toml" if text == "toml" else "yaml"


def _form_view(
    ctx: Ctx,
    *,
    kind: str,
    name: str = "",
    text: str = "",
    fmt: str = "yaml",
    version: int = 0,
    namespace: str = "",
    error: str = "",
    status: int = 200,
) -> View:
    title = f"Edit {kind} {name}" if name else "Create a task or workflow"
    return View(
        "edit.html",
        {
            "kind": kind,
            "kinds": _KINDS,
            "name": name,
            "text": text,
            "fmt": fmt,
            "version": version,
            "namespace": namespace,
            "error": error,
            "action": f"/edit/{kind}s/{_q(name)}" if name else "/edit/new",
        },
        status=status,
        title=title,
    )


def refused_status(exc: RaftschedError) -> int:
    """The status of a refused edit; a refusal the console pages answer themselves (signed out,
    permission, gone) is raised again, so it gets the console's 401/403/404 page."""
    if isinstance(exc, Unauthenticated | PermissionDenied | NotFound):
        raise exc
    if isinstance(exc, Conflict | AlreadyExists):
        return 409
    return 400 if isinstance(exc, InvalidSpec) else 503


# -- create --------------------------------------------------------------------------------------


def new_page(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    kind = ctx.arg("kind", "task")
    kind = kind if kind in _KINDS else "task"
    text = _EXAMPLES[kind]
    ns = ctx.arg("ns")  # the list page's link names a namespace the caller may write to
    if ns and _NAMESPACE.fullmatch(ns):
        text = text.replace('namespace: "default"', f'namespace: "{ns}"')
    return _form_view(ctx, kind=kind, text=text)


def create(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    kind = ctx.form.get("kind", "task")
    kind = kind if kind in _KINDS else "task"
    text, fmt = ctx.form.get("text", ""), ctx.form.get("format", "yaml")
    created: list[str] = []
    try:
        if kind == "workflow":
            workflow = parse_workflow_text(text, _fmt(fmt), SOURCE)
            if workflow.name in {w.spec.name for w in ctx.client.list_workflows(prefix=workflow.name)}:
                raise Conflict(f"workflow {workflow.name!r} already exists: edit it on its page")
            record, _ = ctx.client.apply_workflow(workflow)
            return Redirect(
                f"/workflows/{_q(record.spec.name)}", ("ok", f"created workflow {record.spec.name}")
            )
        tasks = parse_task_text(text, _fmt(fmt), SOURCE).tasks
        if not tasks:
            raise InvalidSpec("tasks", "the text declares no task")
        for task, _where in tasks:
            ctx.client.add_task(task)
            created.append(task.name)
    except RaftschedError as exc:
        # A task file of several tasks: say which were created before the refusal.
        error = f"created {', '.join(created)}; then: {exc}" if created else str(exc)
        return _form_view(ctx, kind=kind, text=text, fmt=fmt, error=error, status=refused_status(exc))
    where = f"/tasks/{_q(created[0])}" if len(created) == 1 else "/tasks"
    return Redirect(where, ("ok", f"created task{'s' if len(created) > 1 else ''} {', '.join(created)}"))


# -- tasks ---------------------------------------------------------------------------------------


def edit_task_page(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    rec = ctx.client.get_task(m["name"])
    spec = codec.stored_spec_from_pb(rec.spec)
    return _form_view(
        ctx,
        kind="task",
        name=spec.name,
        text=task_file_text(spec),
        version=rec.version,
        namespace=spec.namespace,
    )


def edit_task(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    text, fmt = ctx.form.get("text", ""), ctx.form.get("format", "yaml")
    version = _version(ctx)
    namespace = ctx.form.get("namespace", "")
    try:
        tasks = parse_task_text(text, _fmt(fmt), SOURCE).tasks
        if len(tasks) != 1 or tasks[0][0].name != name:
            names = ", ".join(repr(spec.name) for spec, _ in tasks) or "none"
            raise InvalidSpec("tasks", f"this page edits task {name!r} only; the text declares {names}")
        current = codec.stored_spec_from_pb(ctx.client.get_task(name).spec)
        ctx.client.update_task(normalize_for(tasks[0][0], current), expected_version=version)
    except RaftschedError as exc:
        return _form_view(
            ctx,
            kind="task",
            name=name,
            text=text,
            fmt=fmt,
            version=version,
            namespace=namespace,
            error=_conflict_hint(exc),
            status=refused_status(exc),
        )
    return Redirect(f"/tasks/{_q(name)}", ("ok", f"task {name} updated"))


def delete_task(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    ctx.client.delete_task(name)
    return Redirect("/tasks", ("ok", f"task {name} deleted"))


# -- workflows -----------------------------------------------------------------------------------


def edit_workflow_page(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    rec = ctx.client.get_workflow(m["name"])
    return _form_view(
        ctx,
        kind="workflow",
        name=rec.spec.name,
        text=workflow_file_text(rec.spec),
        version=rec.version,
        namespace=rec.spec.namespace,
    )


def edit_workflow(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    text, fmt = ctx.form.get("text", ""), ctx.form.get("format", "yaml")
    version = _version(ctx)
    namespace = ctx.form.get("namespace", "")
    try:
        spec = parse_workflow_text(text, _fmt(fmt), SOURCE)
        if spec.name != name:
            raise InvalidSpec("name", f"this page edits workflow {name!r}; the text names {spec.name!r}")
        record, changed = ctx.client.apply_workflow(spec, expected_version=version)
    except RaftschedError as exc:
        return _form_view(
            ctx,
            kind="workflow",
            name=name,
            text=text,
            fmt=fmt,
            version=version,
            namespace=namespace,
            error=_conflict_hint(exc),
            status=refused_status(exc),
        )
    said = f"workflow {name} is now version {record.version}" if changed else f"workflow {name} unchanged"
    return Redirect(f"/workflows/{_q(name)}", ("ok", said))


def operate_workflow(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name, op = m["name"], m["op"]
    if op == "pause":
        ctx.client.pause_workflow(name)
        return Redirect(f"/workflows/{_q(name)}", ("ok", f"workflow {name} paused"))
    if op == "resume":
        ctx.client.resume_workflow(name)
        return Redirect(f"/workflows/{_q(name)}", ("ok", f"workflow {name} resumed"))
    force = ctx.form.get("force", "") == "1"
    _, killed = ctx.client.delete_workflow(name, force=force, reason="deleted from the web console")
    return Redirect(
        "/workflows", ("ok", f"workflow {name} deleted" + (f" ({killed} runs killed)" if killed else ""))
    )


# -- helpers -------------------------------------------------------------------------------------


def _version(ctx: Ctx) -> int:
    try:
        return max(0, int(ctx.form.get("version", "0")))
    except ValueError:
        return 0


def _conflict_hint(exc: RaftschedError) -> str:
    if isinstance(exc, Conflict) and "version" in str(exc):
        return f"{exc} — it was changed since this page was opened: reload it to edit the current version"
    return str(exc)


_EXAMPLES: Final = {
    "task": (
        'namespace: "default"\n'
        "tasks:\n"
        '  - name: "nightly-report"\n'
        '    cron: "0 3 * * *"\n'
        '    command: "echo report"\n'
    ),
    "workflow": (
        'name: "etl"\n'
        'namespace: "default"\n'
        'schedule: "0 2 * * *"\n'
        "tasks:\n"
        '  - name: "extract"\n'
        '    command: "echo extract {{ ds }}"\n'
        '  - name: "load"\n'
        '    command: "echo load"\n'
        '    depends_on: ["extract"]\n'
    ),
}

_NAME: Final = r"(?P<name>[^/]+)"
_NAMESPACE: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")

ROUTES: Final = [
    ("GET", r"/edit/new", new_page, False),
    ("POST", r"/edit/new", create, False),
    ("GET", rf"/edit/tasks/{_NAME}", edit_task_page, False),
    ("POST", rf"/edit/tasks/{_NAME}", edit_task, False),
    ("POST", rf"/edit/tasks/{_NAME}/delete", delete_task, False),
    ("GET", rf"/edit/workflows/{_NAME}", edit_workflow_page, False),
    ("POST", rf"/edit/workflows/{_NAME}", edit_workflow, False),
    ("POST", rf"/edit/workflows/{_NAME}/(?P<op>pause|resume|delete)", operate_workflow, False),
]
"""The editing routes, appended to :data:`raftsched.web.views.ROUTES`."""
