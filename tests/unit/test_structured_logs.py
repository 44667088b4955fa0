"""The JSON log formatter and the context fields call sites attach."""

from __future__ import annotations

import json
import logging
import sys

from raftsched.cli.process import CONTEXT_FIELDS, JsonFormatter
from raftsched.logfields import attempt_fields, leadership_fields, run_fields, run_of, task_of


def record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("raftsched.test", logging.WARNING, __file__, 1, msg, args, None)
    rec.__dict__.update(extra)
    return rec


def test_a_record_is_one_json_object_with_the_base_keys_and_its_context() -> None:
    line = JsonFormatter().format(
        record("attempt %s failed:\n%s", "t@1/0/2", "exit 3", **attempt_fields("t@1/0/2", executor="ex1"))
    )
    assert "\n" not in line
    out = json.loads(line)
    assert out["level"] == "warning" and out["logger"] == "raftsched.test"
    assert out["message"] == "attempt t@1/0/2 failed:\nexit 3"
    assert out["ts"].endswith("Z") and out["ts"][10] == "T"
    ids = (out["execution_id"], out["run_id"], out["task"], out["executor"])
    assert ids == ("t@1/0/2", "t@1", "t", "ex1")


def test_fields_left_unset_or_unknown_are_not_written() -> None:
    out = json.loads(JsonFormatter().format(record("plain", executor=None, password="x")))
    assert set(out) == {"ts", "level", "logger", "message"}


def test_an_exception_is_kept_in_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = JsonFormatter().format(rec)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["exception"]


def test_ids_are_taken_apart_when_not_given() -> None:
    assert run_of("nightly@1700000000000~m3/2/1") == "nightly@1700000000000~m3"
    assert task_of("nightly@1700000000000~m3") == "nightly"
    assert run_of("no-slashes") == "" and task_of("no-at") == ""
    assert attempt_fields("a@5/0/1") == {"execution_id": "a@5/0/1", "run_id": "a@5", "task": "a"}
    given = attempt_fields("x", "r", "t", attempt=2)
    assert given == {"execution_id": "x", "run_id": "r", "task": "t", "attempt": 2}
    assert run_fields("a@5", 3, 2)["execution_id"] == "a@5/3/2"


def test_leadership_fields_carry_term_and_epoch() -> None:
    assert leadership_fields(7) == {"term": 7, "epoch": 7}
    assert leadership_fields(8, 7, node="n1") == {"term": 8, "epoch": 7, "node": "n1"}


def test_every_field_the_helpers_write_is_one_the_formatter_keeps() -> None:
    written = {
        *attempt_fields("a@1/0/1", attempt=1, executor="e"),
        *leadership_fields(1, node="n", leader="n"),
    }
    assert written <= set(CONTEXT_FIELDS)
