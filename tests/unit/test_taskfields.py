"""The task field table covers every field of the values it maps, and its readers follow it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from raftsched.cli import errors, parser, tasks
from raftsched.errors import InvalidSpec
from raftsched.model import TaskSpec
from raftsched.taskfields import TASK_FIELDS, WORKFLOW_FIELDS, Field, Kind
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow import files, taskfiles

ROOT = Path(__file__).resolve().parents[2]


def test_every_taskspec_attribute_is_a_field_of_the_table() -> None:
    declared = {f.attr for f in TASK_FIELDS if f.attr}
    assert declared == {f.name for f in dataclasses.fields(TaskSpec)}


def test_every_workflow_task_and_workflow_message_field_is_a_field_of_the_table() -> None:
    task_protos = {f.proto for f in TASK_FIELDS if f.workflow_task}
    assert task_protos == {f.name for f in pb.WorkflowTaskSpec.DESCRIPTOR.fields}
    workflow_protos = {f.proto.partition(".")[0] for f in WORKFLOW_FIELDS}
    assert workflow_protos == {f.name for f in pb.WorkflowSpec.DESCRIPTOR.fields}


def _resolves(message: type, dotted: str) -> bool:
    descriptor = message.DESCRIPTOR  # type: ignore[attr-defined]
    for name in dotted.split("."):
        found = descriptor.fields_by_name.get(name)
        if found is None:
            return False
        descriptor = found.message_type
    return True


@pytest.mark.parametrize("f", TASK_FIELDS, ids=lambda f: f.key)
def test_each_task_field_names_real_protobuf_fields(f: Field) -> None:
    if f.task_file or f.flag:
        assert _resolves(pb.TaskSpec, f.proto), f.proto
    if f.workflow_task:
        assert _resolves(pb.WorkflowTaskSpec, f.proto), f.proto


@pytest.mark.parametrize("f", WORKFLOW_FIELDS, ids=lambda f: f.key)
def test_each_workflow_field_names_a_real_protobuf_field(f: Field) -> None:
    assert _resolves(pb.WorkflowSpec, f.proto), f.proto


def test_choices_match_their_enums_and_protobuf_values() -> None:
    for f in (*TASK_FIELDS, *WORKFLOW_FIELDS):
        if f.kind != Kind.CHOICE:
            continue
        assert f.choices, f.key
        if f.enum is not None:
            assert f.choices == tuple(member.value for member in f.enum), f.key
        if f.enum_prefix:
            assert all(hasattr(pb, f.enum_prefix + name.upper()) for name in f.choices), f.key


def test_no_spelling_means_two_keys() -> None:
    for fields in (TASK_FIELDS, WORKFLOW_FIELDS):
        spellings = [
            name for f in fields for name in (f.key, *f.aliases, *f.task_file_aliases) if "." not in f.key
        ]
        assert len(spellings) == len(set(spellings))
    hinted = [(hint, f.file_key) for f in (*TASK_FIELDS, *WORKFLOW_FIELDS) for hint in f.hints]
    assert len(dict(hinted)) == len(set(hinted)), "a hint suggests two different keys"


def test_every_option_is_laid_out_once_and_parses_into_its_attribute() -> None:
    laid_out = [key for _, keys in parser._SPEC_OPTION_LAYOUT for key in keys]
    with_flags = [f.key for f in TASK_FIELDS if f.flag and f.attr != "trigger"]
    assert sorted(laid_out) == sorted(with_flags)
    args = parser.parse_args(["task", "update", "t"])
    for f in TASK_FIELDS:
        if f.flag:
            assert hasattr(args, tasks.option_dest(f)), f.flag


def test_every_model_error_of_a_field_names_its_option_and_its_file_key() -> None:
    for f in TASK_FIELDS:
        for error in f.errors:
            if f.flag:
                assert errors.invalid_message(InvalidSpec(error, "bad")).startswith(f.flag + ": ")
            if f.task_file:
                assert taskfiles._file_key(error) == f.key


def test_the_file_parsers_take_their_keys_from_the_table() -> None:
    assert set(taskfiles.TASK_KEYS) == {f.file_key for f in TASK_FIELDS if f.task_file}
    assert set(files.TASK_KEYS) == {f.file_key for f in TASK_FIELDS if f.workflow_task}
    assert tuple(dict.fromkeys(f.file_key for f in WORKFLOW_FIELDS)) == files.WORKFLOW_KEYS  # sla: nested
    assert taskfiles._ALIASES == {
        "retry": "retries",
        "max_retries": "retries",
        "worker_type": "runner",
        "schedule": "cron",
        "interval": "every",
        "tz": "timezone",
    }
    assert files.ACCEPTED_ALIASES == {"dag_name": "name", "retry": "retries", "worker_type": "runner"}
