"""The strict template language: variables in UTC, params, errors that name the variable."""

from __future__ import annotations

import pytest

from raftsched.errors import InvalidSpec, TemplateError
from raftsched.workflow.template import (
    TemplateContext,
    check_template,
    render,
    render_params_json,
    template_params,
)

# 2025-03-01T02:30:00Z
AT = 1_740_796_200_000
CTX = TemplateContext(AT, "etl@1740796200000", {"n": 42, "s": "a b", "flag": True, "obj": {"b": 1, "a": [1]}})


def test_every_variable_renders_in_utc() -> None:
    text = "{{ds}} {{ ds_nodash }} {{  ts  }} {{nominal_time}} {{ logical_ms }} {{ run_id }}"
    assert render(text, CTX) == (
        "2025-03-01 20250301 2025-03-01T02:30:00Z 1740796200 1740796200000 etl@1740796200000"
    )


def test_sub_second_and_pre_epoch_times_floor() -> None:
    ctx = TemplateContext(-1, "r", {})
    assert render("{{ ts }} {{ nominal_time }} {{ ds }}", ctx) == "1969-12-31T23:59:59Z -1 1969-12-31"
    assert render("{{ ts }}", TemplateContext(AT + 999, "r", {})) == "2025-03-01T02:30:00Z"
    assert render("{{ ds }}", TemplateContext(-59_000_000_000_000, "r", {})).startswith("01")  # year 0100


def test_params_render_strings_as_is_and_others_as_json() -> None:
    assert render("{{ params.n }}|{{ params.s }}|{{ params.flag }}|{{ params.obj }}", CTX) == (
        '42|a b|true|{"a":[1],"b":1}'
    )


def test_text_without_placeholders_is_untouched_and_literals_escape_braces() -> None:
    assert render("awk '{print $1}' }} x", CTX) == "awk '{print $1}' }} x"
    assert render("{{ '{{' }} ds }}", CTX) == "{{ ds }}"
    assert check_template('{{ "}}" }}') != []  # the first "}}" closes the placeholder: no way to quote it


def test_check_template_reports_every_error_with_a_hint() -> None:
    errors = check_template("{{ dss }} {{ param }} {{ ds | upper }} {{ 1 }} {{ }} {{ ds")
    assert len(errors) == 6, errors
    assert errors[0].startswith('unknown variable "dss" at column 1 (did you mean "ds"?)')
    assert "params.NAME" in errors[1]
    assert "filters" in errors[2]
    assert "not a variable" in errors[3]
    assert "empty placeholder" in errors[4]
    assert "unclosed" in errors[5]
    assert check_template("echo {{ ds }} {{ params.x-y }}") == []


def test_template_params() -> None:
    assert template_params("{{ params.a }}{{params.b_c}} {{ params.a }} {{ ds }} {{ nope }}") == {"a", "b_c"}


def test_render_errors_name_the_variable() -> None:
    with pytest.raises(TemplateError, match=r'params\.missing.*no param "missing".*defined: flag, n, obj, s'):
        render("echo {{ params.missing }}", CTX)
    with pytest.raises(TemplateError, match='unknown variable "tss"') as info:
        render("{{ tss }}", CTX)
    assert isinstance(info.value, InvalidSpec)


def test_render_params_json_merges_run_over_task_over_workflow() -> None:
    merged = render_params_json('{"a": 1, "b": 1, "c": 1}', '{"b": 2, "c": 2}', '{"c": 3}')
    assert merged == {"a": 1, "b": 2, "c": 3}
    assert render_params_json("", "", "") == {}
    with pytest.raises(TemplateError, match="run params: must be a JSON object"):
        render_params_json("", "", "[1]")
    with pytest.raises(TemplateError, match="task params: not valid JSON"):
        render_params_json("", "{", "")
