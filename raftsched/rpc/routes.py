"""The HTTP/JSON API's one route table: every Admin RPC and the HTTP routes that reach it.

Both the HTTP gateway (:mod:`raftsched.rpc.http_api`) and the OpenAPI generator
(:mod:`raftsched.rpc.openapi`) read :data:`ROUTES` and nothing else, so the two cannot drift; a
test checks that every Admin RPC has at least one route and that every route names an RPC and
request fields that exist.

A route binds parts of the HTTP request to fields of the RPC's request message:

* path parameters (``{name}``, the request field of that name, or the field ``bind`` maps it
  to, such as ``spec.name``) are path segments, percent-decoded, so a name holding ``/``, ``#``
  or ``:`` is sent percent-encoded;
* ``body``: ``"*"`` (the JSON body is the whole request message, path fields excepted), a field
  name (the body is that field), or ``""`` (no body);
* every other scalar field is a query parameter (``?page_size=50``), in the protobuf JSON
  spelling of its value;
* ``fixed`` sets fields to constants (``:enable`` is SetEnabled with ``enabled = true``).

The reply is the RPC's reply message in protobuf's JSON mapping, or the field ``response`` names.
A path's last segment may end in a custom verb (``/tasks/{name}:trigger``), as in Google's API
design guide.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

PREFIX: Final = "/api/v1"

_PARAM = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Stream:
    """A route answered as server-sent events: the RPC is called again every poll interval and
    each item of ``items`` (a field path of the reply: a repeated field, or a message) that is new
    or changed is sent as one event ``event`` with its JSON; ``key`` names the item fields that
    identify it. ``done`` (a field path of the reply) ends the stream once it is non-zero;
    ``follow``: only with ``?follow=true`` (else the route answers once, as usual); ``advance``
    moves a request field (``since_ms``) to the newest item seen, so a long stream keeps reading
    only what is new."""

    items: str
    key: tuple[str, ...]
    event: str
    done: str = ""
    follow: bool = False
    advance: tuple[str, str] | None = None  # (request field, item field): move it to the newest seen


@dataclass(frozen=True, slots=True)
class Merge:
    """A ``PATCH`` answered as a JSON merge patch (RFC 7396): the body's ``field`` (a message
    field of the request) is merged onto the current value, which ``rpc`` (called with the
    route's path parameters by their own names) answers at ``current``; a ``null`` at the top
    of the patch resets that field to its default, an object merges into the object it names (a
    member of a ``oneof`` replaces its siblings), anything else replaces. Unless the body gives
    ``version`` (a request field), it is set to the reply's ``current_version``: a change made
    between the read and the write is refused (409), never overwritten."""

    rpc: str
    current: str
    field: str
    version: str
    current_version: str


@dataclass(frozen=True, slots=True)
class Route:
    """``method path`` calls Admin RPC ``rpc`` (see the module docstring for the bindings)."""

    method: str
    path: str  # under PREFIX, e.g. "/tasks/{name}:trigger"
    rpc: str
    summary: str
    body: str = ""
    fixed: Mapping[str, bool | str | int] = field(default_factory=dict)
    response: str = ""  # a field path of the reply to answer with ("" = the whole reply)
    bind: Mapping[str, str] = field(default_factory=dict)  # path parameter -> request field path
    stream: Stream | None = None
    merge: Merge | None = None
    operation: str = ""  # the OpenAPI operationId ("" = the RPC's name, made unique)

    def field_of(self, param: str) -> str:
        """The request field (a dotted path) path parameter ``param`` sets."""
        return self.bind.get(param, param)

    @property
    def params(self) -> tuple[str, ...]:
        """The path parameters, in order (field paths of the request)."""
        return tuple(_PARAM.findall(self.path))

    @property
    def write(self) -> bool:
        """Whether the route changes state (its method is not GET)."""
        return self.method != "GET"

    @property
    def operation_id(self) -> str:
        """A unique name for the route (the RPC's name, unless another route uses it first)."""
        return _OPERATION_IDS[(self.method, self.path)]

    def match(self, method: str, raw_path: str) -> dict[str, str] | None:
        """The request fields the path sets (``{field path: percent-decoded value}``) if ``method
        raw_path`` is this route, else None. ``raw_path`` is the path as sent (still
        percent-encoded), without the query."""
        if method != self.method:
            return None
        found = _compiled(self.path).fullmatch(raw_path)
        if found is None:
            return None
        return {self.field_of(k): urllib.parse.unquote(v) for k, v in found.groupdict().items()}


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(path: str) -> re.Pattern[str]:
    pattern = _CACHE.get(path)
    if pattern is None:
        out = []
        pos = 0
        for m in _PARAM.finditer(path):
            out.append(re.escape(path[pos : m.start()]))
            # A segment: anything but "/" (a ":" is the verb's separator only before the verb,
            # which the regex's backtracking finds; send a ":" in a name as %3A to be safe).
            out.append(f"(?P<{m.group(1)}>[^/]+)")
            pos = m.end()
        out.append(re.escape(path[pos:]))
        pattern = re.compile(re.escape(PREFIX) + "".join(out))
        _CACHE[path] = pattern
    return pattern


R = Route
ROUTES: Final[tuple[Route, ...]] = (
    # -- tasks -------------------------------------------------------------------------------
    R("GET", "/tasks", "ListTasks", "List tasks, a page at a time"),
    R("POST", "/tasks", "AddTask", "Create a task", body="*"),
    R("POST", "/tasks:batch", "AddTasks", "Create many tasks in one call", body="*"),
    R("GET", "/tasks/{name}", "GetTask", "Read a task"),
    R(
        "PATCH",
        "/tasks/{name}",
        "UpdateTask",
        "Change some fields of a task's spec (a JSON merge patch of spec, at the version read)",
        body="*",
        bind={"name": "spec.name"},
        merge=Merge("GetTask", "task.spec", "spec", "expected_version", "task.version"),
    ),
    R(
        "PUT",
        "/tasks/{name}",
        "UpdateTask",
        "Replace a task's whole spec (optionally only at expected_version)",
        body="*",
        bind={"name": "spec.name"},
        operation="ReplaceTask",
    ),
    R("DELETE", "/tasks/{name}", "DeleteTask", "Delete a task"),
    R("POST", "/tasks/{name}:enable", "SetEnabled", "Enable a task", fixed={"enabled": True}),
    R("POST", "/tasks/{name}:disable", "SetEnabled", "Disable a task", fixed={"enabled": False}),
    R("POST", "/tasks/{name}:trigger", "TriggerNow", "Run a task now", body="*"),
    R("GET", "/tasks/{task}/runs", "ListRuns", "List a task's runs, newest first"),
    R("GET", "/tasks/{task}/fires", "FireAccounting", "Account for a task's nominal fires"),
    R("GET", "/tasks/{task}/explain", "Explain", "Why a task did (not) fire around at_ms"),
    R(
        "GET",
        "/tasks/{task}/runs:watch",
        "ListRuns",
        "Server-sent events: a task's runs as they are created and change state",
        stream=Stream("runs", ("run_id",), "run"),
    ),
    R(
        "GET",
        "/tasks/{task}/fires:watch",
        "FireAccounting",
        "Server-sent events: a task's fires as they are accounted",
        stream=Stream("fires", ("nominal_ms", "outcome"), "fire", advance=("since_ms", "nominal_ms")),
    ),
    # -- runs --------------------------------------------------------------------------------
    R("GET", "/runs", "ListRuns", "List runs of every task the caller may see"),
    R("GET", "/runs/{run_id}", "GetRun", "Read a run with its timeline and output tails"),
    R(
        "GET",
        "/runs/{run_id}/logs",
        "GetRun",
        "A run's output: each shard attempt's stdout and stderr tails (?follow=true: events)",
        response="run.shards",
        stream=Stream("run.shards", ("shard", "attempt"), "shard", done="run.finished_ms", follow=True),
    ),
    R("POST", "/runs/{run_id}:retry", "RetryRun", "Retry a finished run", body="*"),
    R("POST", "/runs/{run_id}:cancel", "CancelRun", "Cancel an unfinished run (or one shard)", body="*"),
    R(
        "POST",
        "/runs:cancel",
        "CancelRuns",
        "Cancel the unfinished runs of a task, namespace or owner",
        body="*",
    ),
    # -- workflows ---------------------------------------------------------------------------
    R("GET", "/workflows", "ListWorkflows", "List workflows"),
    R("POST", "/workflows", "ApplyWorkflow", "Create or update a workflow", body="*"),
    R("GET", "/workflows/{name}", "GetWorkflow", "Read a workflow (a version with ?version=)"),
    R("DELETE", "/workflows/{name}", "DeleteWorkflow", "Delete a workflow"),
    R("POST", "/workflows/{name}:pause", "SetWorkflowPaused", "Pause a workflow", fixed={"paused": True}),
    R(
        "POST",
        "/workflows/{name}:resume",
        "SetWorkflowPaused",
        "Resume a paused workflow",
        fixed={"paused": False},
    ),
    R("GET", "/workflows/{workflow}/runs", "ListWorkflowRuns", "List a workflow's runs"),
    R(
        "GET",
        "/workflows/{workflow}/runs:watch",
        "ListWorkflowRuns",
        "Server-sent events: a workflow's runs as they start and change state",
        stream=Stream("runs", ("run_id",), "workflow_run"),
    ),
    R("POST", "/workflows/{workflow}/runs", "StartWorkflowRun", "Start a workflow run", body="*"),
    R("GET", "/workflows/{workflow}/backfills", "ListBackfills", "List a workflow's backfills"),
    R("POST", "/workflows/{workflow}/backfills", "Backfill", "Start a backfill", body="*"),
    R("GET", "/workflows/{workflow}/lineage/{task}", "Lineage", "A workflow task's up- and downstream"),
    R("GET", "/workflow-runs/{run_id}", "GetWorkflowRun", "Read a workflow run"),
    R(
        "GET",
        "/workflow-runs/{run_id}/tasks/{task}/explain",
        "ExplainWorkflowTask",
        "Why a task of a workflow run is not running (dependencies, gates, waits)",
    ),
    R(
        "POST",
        "/workflow-runs/{run_id}:operate",
        "OperateWorkflowRun",
        "Kill, rerun or mark a workflow run or one of its tasks",
        body="*",
    ),
    R("GET", "/backfills/{backfill_id}", "GetBackfill", "Read a backfill"),
    # -- events ----------------------------------------------------------------------------------
    R("GET", "/events", "ListEvents", "List accepted events (inside the dedupe window)"),
    # The body is the event's payload, not the request message (raftsched.rpc.webhooks): the
    # request's other fields are query parameters; a signed body needs no token.
    R("POST", "/events/{name}", "EmitEvent", "Emit an event: the body is its JSON payload (webhooks)"),
    # -- calendars, quotas, locks, alerts ----------------------------------------------------
    R("GET", "/calendars", "ListCalendars", "List calendars"),
    R("POST", "/calendars", "SetCalendar", "Create or replace a calendar", body="*"),
    R("GET", "/calendars/{name}", "GetCalendar", "Read a calendar and what uses it"),
    R("DELETE", "/calendars/{name}", "DeleteCalendar", "Delete a calendar"),
    R("GET", "/quotas", "ListQuotas", "List quotas"),
    R("POST", "/quotas", "SetQuota", "Set an owner or namespace quota", body="*"),
    R("DELETE", "/quotas/{kind}/{name}", "DeleteQuota", "Delete a quota"),
    R("GET", "/locks", "ListLocks", "List locks with their holders and waiters"),
    R("GET", "/alerts", "ListAlerts", "List alert events and their delivery"),
    R("POST", "/alerts/{id}:ack", "AckAlert", "Acknowledge an alert", body="*"),
    # -- executors, status, membership, backup -----------------------------------------------
    R("GET", "/executors", "ListExecutors", "List executors"),
    R("POST", "/executors/{name}:drain", "DrainExecutor", "Drain an executor", body="*"),
    R("GET", "/status", "ClusterStatus", "The cluster's status, as this node sees it"),
    R("GET", "/node", "NodeStatus", "This node's status"),
    R("GET", "/members", "GetMembership", "The scheduler nodes of the cluster"),
    R("POST", "/members", "AddNode", "Add a scheduler node", body="member"),
    R("DELETE", "/members/{id}", "RemoveNode", "Remove a scheduler node"),
    R("GET", "/backup", "Backup", "A consistent backup of this node's state (all chunks)"),
    # -- tokens and audit --------------------------------------------------------------------
    R("GET", "/tokens", "ListTokens", "List API tokens (never their secrets)"),
    R("POST", "/tokens", "CreateToken", "Create an API token", body="*"),
    R("DELETE", "/tokens/{id}", "RevokeToken", "Revoke an API token"),
    R("GET", "/audit", "ListAudit", "Read the audit log"),
    # -- pools -------------------------------------------------------------------------------
    R("GET", "/pools", "ListPools", "List pools with their slots, holders and waiting attempts"),
    R("POST", "/pools", "SetPool", "Create or resize a pool", body="*"),
    R("DELETE", "/pools/{name}", "DeletePool", "Delete a pool (refused while tasks name it)"),
    # -- task backfills ------------------------------------------------------------------------
    R("POST", "/tasks/{task}:backfill", "BackfillTask", "Backfill a plain task over a range", body="*"),
)
"""Every HTTP route of the API, in the order a request is matched against them."""


def _operation_ids(routes: tuple[Route, ...]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    used: set[str] = set()
    for r in routes:
        name = r.operation or r.rpc
        if name in used and not r.operation:
            verb = r.path.rpartition(":")[2] if ":" in r.path.rpartition("/")[2] else ""
            tail = verb or r.path.strip("/").split("/")[0].replace("-", "_")
            name = f"{r.rpc}_{tail}"
        if name in used:
            raise RuntimeError(f"route table: two routes are named {name}")
        used.add(name)
        out[(r.method, r.path)] = name
    return out


_OPERATION_IDS: Final = _operation_ids(ROUTES)


def _verb(route: Route) -> bool:
    return ":" in route.path.rpartition("/")[2]


def _candidates(raw_path: str) -> list[Route]:
    """The routes whose path ``raw_path`` matches, whatever the method. A route ending in a
    custom verb is more specific than a bare parameter: ``/tasks/etl:trigger`` is the trigger
    route's path only, never the task ``etl:trigger`` (send that name as ``etl%3Atrigger``)."""
    found = [r for r in ROUTES if _compiled(r.path).fullmatch(raw_path)]
    verbs = [r for r in found if _verb(r)]
    return verbs or found


def find(method: str, raw_path: str) -> tuple[Route, dict[str, str]] | None:
    """The route that serves ``method raw_path``, with its decoded path parameters."""
    for route in _candidates(raw_path):
        params = route.match(method, raw_path)
        if params is not None:
            return route, params
    return None


def allowed_methods(raw_path: str) -> list[str]:
    """The methods served at ``raw_path`` (for a 405's ``Allow`` header)."""
    return sorted({r.method for r in _candidates(raw_path)})
