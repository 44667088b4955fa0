"""A tiny, strict template language for workflow task commands and env values (not Jinja).

Pure and deterministic: every value is derived from the run's logical time in UTC with integer
arithmetic, so every replica and executor renders the same text without consulting tzdata.

Syntax
    ``{{ NAME }}`` is replaced by a variable; whitespace inside the braces is optional
    (``{{ds}}`` = ``{{ ds }}``). Everything outside ``{{ ... }}`` is copied verbatim. There are no
    filters, expressions or control structures. A literal ``{{`` is written as ``{{ "{{" }}``
    (a quoted string renders as itself). A stray ``}}`` outside a placeholder is plain text.

Variables (the run's logical time, UTC)
    ================  ==========================================  ===========================
    ``ds``            logical date                                ``2025-03-01``
    ``ds_nodash``     logical date without dashes                 ``20250301``
    ``ts``            logical instant, ISO 8601, seconds, ``Z``   ``2025-03-01T02:30:00Z``
    ``nominal_time``  the same instant as integer epoch seconds   ``1740796200``
    ``logical_ms``    the same instant as integer epoch ms        ``1740796200000``
    ``run_id``        the workflow run's id                       ``etl@1740796200000``
    ``params.NAME``   a param (run > task > workflow params)      strings as is, others JSON
    ``event.name``    the event that started the run ("" if none) ``orders-ready``
    ``event.key``     its dedupe key ("" if none)                 ``2026-12-04``
    ``event.payload.NAME``  a top-level field of its JSON payload strings as is, others JSON
    ``secret.NAME``   a secret, resolved on the executor (env only) left as ``{{ secret.NAME }}``
    ================  ==========================================  ===========================

Errors
    :func:`check_template` returns every syntax error and unknown variable as messages (used at
    submission). :func:`render` raises :class:`~raftsched.errors.TemplateError` naming the
    variable, e.g. a param that no level defines for this run.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raftsched.errors import InvalidSpec, TemplateError, clip, quote
from raftsched.model import parse_params
from raftsched.secretref import check_secret_refs

__all__ = [
    "VARIABLES",
    "TemplateContext",
    "TemplateError",
    "check_template",
    "render",
    "render_params_json",
    "template_params",
    "template_secrets",
]

VARIABLES = ("ds", "ds_nodash", "ts", "nominal_time", "logical_ms", "run_id", "event.name", "event.key")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM = re.compile(r"params\.([A-Za-z_][A-Za-z0-9_-]*)")
_PAYLOAD = re.compile(r"event\.payload\.([A-Za-z_][A-Za-z0-9_-]*)")
_SECRET = re.compile(r"secret\.([A-Za-z_][A-Za-z0-9_-]{0,127})")
_LITERAL = re.compile(r"\"([^\"]*)\"|'([^']*)'")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


@dataclass(frozen=True, slots=True)
class TemplateContext:
    """What a template renders against: the run's logical time, its id and its merged params."""

    logical_ms: int
    run_id: str
    params: Mapping[str, object]
    # The event that started the run (issue 28 §3); "" and {} for a run no event started.
    event_name: str = ""
    event_key: str = ""
    event_payload: Mapping[str, object] | None = None

    @staticmethod
    def payload_of(payload_json: str) -> Mapping[str, object]:
        """A stored event payload as the context holds it ({} for none or a non-object)."""
        try:
            value = json.loads(payload_json) if payload_json else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class _Var:
    kind: str  # a name from VARIABLES, "param" or "literal"
    value: str  # the param name, or the literal text
    column: int  # 1-based column of the opening braces


_Segment = str | _Var


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[tuple[_Segment, ...], tuple[str, ...]]:
    """Split ``text`` into literal text and placeholders; also return every error found."""
    segments: list[_Segment] = []
    errors: list[str] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            if pos < len(text):
                segments.append(text[pos:])
            break
        if start > pos:
            segments.append(text[pos:start])
        column = start + 1
        end = text.find("}}", start + 2)
        if end < 0:
            errors.append(f"unclosed '{{{{' at column {column}")
            break
        inner = text[start + 2 : end].strip()
        pos = end + 2
        var = _classify(inner, column, errors)
        if var is not None:
            segments.append(var)
    return tuple(segments), tuple(errors)


def _classify(inner: str, column: int, errors: list[str]) -> _Var | None:
    shown = "{{ " + clip(inner, 60) + " }}"  # a placeholder is quoted in messages, bounded
    if not inner:
        errors.append(f"empty placeholder '{{{{ }}}}' at column {column}")
        return None
    literal = _LITERAL.fullmatch(inner)
    if literal is not None:
        value = literal.group(1) if literal.group(1) is not None else literal.group(2)
        return _Var("literal", value, column)
    param = _PARAM.fullmatch(inner)
    if param is not None:
        return _Var("param", param.group(1), column)
    payload = _PAYLOAD.fullmatch(inner)
    if payload is not None:
        return _Var("payload", payload.group(1), column)
    if inner in VARIABLES:
        return _Var(inner, inner, column)
    secret = _SECRET.fullmatch(inner)
    if secret is not None:
        return _Var("secret", secret.group(1), column)
    if inner.startswith("secret"):
        bad = check_secret_refs("{{ " + inner + " }}")
        if bad:
            errors.append(f"{shown} at column {column}: a bad secret reference; " + bad[0].split(": ", 1)[1])
            return None
    if "{{" in inner:
        errors.append(f"'{{{{' inside a placeholder at column {column} (a '}}}}' is missing before it)")
    elif "|" in inner or "(" in inner:
        errors.append(f"{shown} at column {column}: filters and expressions are not supported")
    elif inner.startswith("params."):
        errors.append(
            f"{shown} at column {column}: param names are letters, digits, _ and - "
            "(starting with a letter or _)"
        )
    elif _IDENT.fullmatch(inner):
        close = difflib.get_close_matches(inner, [*VARIABLES, "params"], n=1)
        hint = f' (did you mean "{close[0]}"?)' if close and close[0] != "params" else ""
        if inner == "params" or close == ["params"]:
            hint = " (write params.NAME)"
        errors.append(
            f"unknown variable {quote(inner, 60, double=True)} at column {column}{hint}; "
            f"known: {', '.join(VARIABLES)}, params.NAME"
        )
    else:
        errors.append(f"{shown} at column {column}: not a variable, params.NAME or a quoted string")
    return None


def check_template(text: str) -> list[str]:
    """Every syntax error and unknown variable in ``text``, as messages (empty: the text is fine).

    Whether each ``params.NAME`` is defined is the caller's business (see :func:`template_params`).
    """
    return list(_parse(text)[1])


def template_secrets(text: str) -> set[str]:
    """The secret names ``text`` uses as ``{{ secret.NAME }}`` (syntax errors ignored)."""
    return {seg.value for seg in _parse(text)[0] if isinstance(seg, _Var) and seg.kind == "secret"}


def template_params(text: str) -> set[str]:
    """The param names ``text`` uses as ``{{ params.NAME }}`` (syntax errors ignored)."""
    return {seg.value for seg in _parse(text)[0] if isinstance(seg, _Var) and seg.kind == "param"}


def render(text: str, ctx: TemplateContext) -> str:
    """Render ``text`` for one run. Deterministic; raises :class:`TemplateError` naming the problem.

    Param values: strings as they are, everything else as compact JSON (``42``, ``true``,
    ``null``, ``{"a":1}``).
    """
    segments, errors = _parse(text)
    if errors:
        raise TemplateError("; ".join(errors))
    if not any(isinstance(seg, _Var) for seg in segments):
        return text
    at = _EPOCH + _dt.timedelta(milliseconds=ctx.logical_ms)
    out: list[str] = []
    for seg in segments:
        if isinstance(seg, str):
            out.append(seg)
        elif seg.kind == "literal":
            out.append(seg.value)
        elif seg.kind == "param":
            if seg.value not in ctx.params:
                defined = clip(", ".join(sorted(ctx.params)), 200) or "none"
                raise TemplateError(
                    f"{{{{ params.{clip(seg.value, 60)} }}}}: no param {quote(seg.value, 60, double=True)} "
                    f"is defined for run {clip(ctx.run_id, 200)} (defined: {defined})"
                )
            out.append(_param_text(ctx.params[seg.value]))
        elif seg.kind == "payload":
            payload = ctx.event_payload or {}
            if seg.value not in payload:
                what = f"event {ctx.event_name!r}'s payload" if ctx.event_name else "no event started it"
                field = quote(seg.value, 60, double=True)
                raise TemplateError(
                    f"{{{{ event.payload.{clip(seg.value, 60)} }}}}: no field {field} "
                    f"for run {clip(ctx.run_id, 200)} ({what})"
                )
            out.append(_param_text(payload[seg.value]))
        elif seg.kind == "secret":
            # Left for the executor to resolve: the value never enters the replicated state.
            out.append(f"{{{{ secret.{seg.value} }}}}")
        elif seg.kind == "event.name":
            out.append(ctx.event_name)
        elif seg.kind == "event.key":
            out.append(ctx.event_key)
        elif seg.kind == "ds":
            out.append(f"{at.year:04d}-{at.month:02d}-{at.day:02d}")
        elif seg.kind == "ds_nodash":
            out.append(f"{at.year:04d}{at.month:02d}{at.day:02d}")
        elif seg.kind == "ts":
            # Formatted by hand: strftime's %Y does not zero-pad years < 1000 on every platform.
            out.append(
                f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}Z"
            )
        elif seg.kind == "nominal_time":
            out.append(str(ctx.logical_ms // 1000))
        elif seg.kind == "logical_ms":
            out.append(str(ctx.logical_ms))
        else:  # run_id
            out.append(ctx.run_id)
    return "".join(out)


def _param_text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def render_params_json(
    workflow_params_json: str, task_params_json: str, run_params_json: str
) -> dict[str, Any]:
    """Merge the three levels of params, top-level keys only: run > task > workflow.

    Each argument is a JSON object or ``""`` (none), decoded by :func:`raftsched.model.parse_params`
    (the same rules as at submission). Raises :class:`TemplateError` naming the level whose params
    break them (submission validates the first two; run params arrive later).
    """
    merged: dict[str, Any] = {}
    for level, raw in (
        ("workflow", workflow_params_json),
        ("task", task_params_json),
        ("run", run_params_json),
    ):
        try:
            merged.update(parse_params(raw, f"{level} params"))
        except InvalidSpec as exc:
            raise TemplateError(str(exc)) from None
    return merged
