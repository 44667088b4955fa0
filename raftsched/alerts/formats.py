"""The bodies a target receives for one routed event, per ``format`` (documented in docs/guide/monitor.md).

* ``json`` (the default): raftsched's own object, one per POST;
* ``slack``: ``{"text": ..., "blocks": [...]}`` for a Slack (or Mattermost, Rocket.Chat)
  incoming webhook;
* ``alertmanager``: a one-alert array for Alertmanager's ``POST /api/v2/alerts``. The labels
  (``alertname``, ``severity``, ``kind``, ``cluster``, ``task``/``workflow``, ``namespace``,
  ``owner``) are the same for every event of one kind and subject, so Alertmanager keeps a
  streak's count notices and its resolved notice as one alert; a resolved notice carries ``endsAt``;
* email: a subject line and a plain-text body (:func:`email_text`).

Pure: the same notice, severity and cluster always give the same bytes.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit, urlunsplit

from raftsched.alerts.routing import Notice, iso, subject

FORMATS = ("json", "slack", "alertmanager")
ALERTMANAGER_PATH = "/api/v2/alerts"
SLACK_TEXT_MAX = 2900  # a section block's text is limited to 3,000 characters
ANNOTATION_TAIL = 1000


def encode(body: object) -> bytes:
    """Canonical JSON (sorted keys, no spaces): the same event always gives the same bytes."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def json_body(notice: Notice, severity: str, cluster: str, link: str) -> dict[str, object]:
    """raftsched's JSON object. A streak event adds ``streak`` (failures so far) and
    ``streak_since_ms``; a resolved one adds ``"resolved": true``."""
    alert = notice.alert
    body: dict[str, object] = {
        "id": alert.id,
        "kind": alert.kind,
        "severity": severity,
        "cluster": cluster,
        "at_ms": alert.at_ms,
        "task": alert.task,
        "workflow": alert.workflow,
        "workflow_run": alert.workflow_run,
        "run_id": alert.run_id,
        "execution_id": alert.execution_id,
        "owner": alert.owner,
        "namespace": alert.namespace,
        "reason": alert.error,
        "output_tail": alert.output_tail,
        "link": link,
    }
    if notice.streak:
        body["streak"] = notice.streak
        body["streak_since_ms"] = notice.since_ms
        body["summary"] = notice.text
    if alert.resolved:
        body["resolved"] = True
    if alert.executor:
        body["executor"] = alert.executor  # fleet health and clock skew (issue 36 §3, §4)
    if alert.node:
        body["node"] = alert.node
    return body


def headline(notice: Notice, severity: str, cluster: str) -> str:
    """One line for a chat message or a mail subject."""
    alert = notice.alert
    state = "RESOLVED" if alert.resolved else severity.upper()
    return f"[{cluster}] {state} {alert.kind} {subject(alert)}: {notice.text}"


def _details(notice: Notice, cluster: str, link: str) -> list[tuple[str, str]]:
    alert = notice.alert
    rows = [
        ("cluster", cluster),
        ("owner", alert.owner),
        ("namespace", alert.namespace),
        ("workflow", alert.workflow),
        ("run", alert.run_id),
        ("execution", alert.execution_id),
        ("at", iso(alert.at_ms)),
        ("alert id", alert.id),
        ("link", link),
    ]
    return [(k, v) for k, v in rows if v]


def slack_body(notice: Notice, severity: str, cluster: str, link: str) -> dict[str, object]:
    """A Slack-compatible message: ``text`` (the notification line) and Block Kit ``blocks``."""
    text = headline(notice, severity, cluster)
    blocks: list[dict[str, object]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[:SLACK_TEXT_MAX]}},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": " · ".join(f"*{k}*: {v}" for k, v in _details(notice, cluster, link)),
                }
            ],
        },
    ]
    if notice.alert.output_tail:
        tail = notice.alert.output_tail[-SLACK_TEXT_MAX:].replace("```", "'''")
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{tail}```"}})
    return {"text": text, "blocks": blocks}


def alertname(kind: str) -> str:
    """``run_failed`` -> ``RaftschedRunFailed`` (Prometheus' naming of alerts)."""
    return "Raftsched" + "".join(part.capitalize() for part in kind.split("_"))


def alertmanager_labels(notice: Notice, severity: str, cluster: str) -> dict[str, str]:
    """The labels that identify the alert in Alertmanager (empty ones left out)."""
    alert = notice.alert
    labels = {
        "alertname": alertname(alert.kind),
        "severity": severity,
        "kind": alert.kind,
        "cluster": cluster,
        "task": alert.task,
        "workflow": alert.workflow,
        "namespace": alert.namespace,
        "owner": alert.owner,
        "executor": alert.executor,
        "node": alert.node,
    }
    return {k: v for k, v in labels.items() if v}


def alertmanager_body(notice: Notice, severity: str, cluster: str, link: str) -> list[dict[str, object]]:
    """The ``POST /api/v2/alerts`` body: one alert. ``startsAt`` is the streak's first failure
    (the event's time outside a streak); a resolved notice sets ``endsAt`` to its time, which
    ends the alert. A firing alert has no ``endsAt``: Alertmanager ends it after its
    ``resolve_timeout`` unless a count notice or a resolved notice comes first."""
    alert = notice.alert
    annotations = {
        "summary": headline(notice, severity, cluster),
        "description": notice.text,
        "reason": alert.error,
        "alert_id": alert.id,
        "run_id": alert.run_id,
        "execution_id": alert.execution_id,
        "workflow_run": alert.workflow_run,
        "output_tail": alert.output_tail[-ANNOTATION_TAIL:],
        "streak": str(notice.streak) if notice.streak else "",
        "link": link,
    }
    item: dict[str, object] = {
        "labels": alertmanager_labels(notice, severity, cluster),
        "annotations": {k: v for k, v in annotations.items() if v},
        "startsAt": iso(notice.since_ms or alert.at_ms),
    }
    if alert.resolved:
        item["endsAt"] = iso(alert.at_ms)
    if link:
        item["generatorURL"] = link
    return [item]


def alertmanager_url(url: str) -> str:
    """Where to POST: ``url`` itself if its path ends with ``/api/v2/alerts``, else that path
    appended to it (``http://am:9093`` -> ``http://am:9093/api/v2/alerts``)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith(ALERTMANAGER_PATH):
        path += ALERTMANAGER_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def body_for(fmt: str, notice: Notice, severity: str, cluster: str, link: str) -> bytes:
    """The encoded body a target of format ``fmt`` receives."""
    if fmt == "slack":
        return encode(slack_body(notice, severity, cluster, link))
    if fmt == "alertmanager":
        return encode(alertmanager_body(notice, severity, cluster, link))
    return encode(json_body(notice, severity, cluster, link))


def email_text(notice: Notice, severity: str, cluster: str, link: str) -> tuple[str, str]:
    """``(subject, body)`` of the mail for ``notice``."""
    alert = notice.alert
    rows = [("kind", alert.kind), ("severity", severity), *_details(notice, cluster, link)]
    width = max(len(k) for k, _ in rows)
    lines = [notice.text, "", *(f"{k.ljust(width)}  {v}" for k, v in rows)]
    if alert.output_tail:
        lines += ["", "output (last lines):", alert.output_tail]
    return headline(notice, severity, cluster)[:250], "\n".join(lines) + "\n"
