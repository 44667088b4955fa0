"""Secrets (issue 29 §7): the reference syntax and its checks at submission, the executor's
sources (environment, file, directory) with their permission check, resolution of params and
env, and masking of the value in what the executor reports and logs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sys
from pathlib import Path

import pytest

from raftsched import codec
from raftsched.errors import InvalidSpec
from raftsched.executor.agent import Executor
from raftsched.executor.commands import SubprocessRunner
from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
from raftsched.executor.runners import AttemptContext
from raftsched.executor.secrets import (
    MASK,
    Masker,
    MaskingFilter,
    MissingSecret,
    SecretStore,
    StreamMasker,
    env_name,
    resolve_attempt,
)
from raftsched.model import parse_params
from raftsched.secretref import check_secret_refs, substitute, uses_secrets
from raftsched.storage.memory import MemoryExecutionLog
from raftsched.v1 import log_pb2 as lpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.template import TemplateContext, check_template, render

VALUE = "s3cr3t-Value!"


# -- syntax -----------------------------------------------------------------------------------------


def test_references_are_found_and_typos_are_refused_with_a_clear_message() -> None:
    seen: list[str] = []

    def lookup(name: str) -> str:
        seen.append(name)
        return name.upper()

    text = "a {{ secret.db_password }} b {{secret.x-y}} {{ secret.db_password }}"
    assert substitute(text, lookup) == "a DB_PASSWORD b X-Y DB_PASSWORD"
    assert seen == ["db_password", "x-y", "db_password"]
    assert check_secret_refs("{{ secret.db_password }}") == []
    [bad] = check_secret_refs("x {{ secret.x y }}")
    assert "bad secret reference '{{ secret.x y }}' at column 3" in bad and "{{ secret.NAME }}" in bad
    [typo] = check_secret_refs("{{ secrets.pw }}")
    assert "did you mean {{ secret.pw }}?" in typo
    assert check_secret_refs("{{ secret.pw") == [
        "unclosed secret reference at column 1 (write {{ secret.NAME }})"
    ]
    assert not uses_secrets("{{ secretary }} {{ ds }}") and check_secret_refs("{{ secretary }}") == []


def test_params_with_a_bad_reference_are_refused_naming_the_key() -> None:
    assert parse_params(json.dumps({"pw": "{{ secret.db }}"})) == {"pw": "{{ secret.db }}"}
    with pytest.raises(InvalidSpec) as err:
        parse_params(json.dumps({"db": {"pw": ["ok", "{{ secret.x y }}"]}}))
    assert str(err.value).startswith("params.db.pw[1]: bad secret reference '{{ secret.x y }}'")
    # An escaped brace is the same text once decoded.
    with pytest.raises(InvalidSpec, match="bad secret reference"):
        parse_params('{"pw": "\\u007b\\u007b secret.a b }}"}')


def test_workflow_templates_keep_the_reference_for_the_executor() -> None:
    assert check_template("{{ secret.pw }}") == []
    [bad] = check_template("{{ secret.x y }}")
    assert "a bad secret reference" in bad
    # Rendered (on every replica) as the reference itself, never a value.
    assert render("{{ ds }} {{secret.pw}}", TemplateContext(0, "wf@0", {})) == "1970-01-01 {{ secret.pw }}"


def test_a_definition_that_references_a_secret_needs_the_secrets_format() -> None:
    task = lpb.Command(
        create_task=lpb.CreateTask(spec=pb.TaskSpec(name="t", params_json='{"a":"{{ secret.pw }}"}'))
    )
    plain = lpb.Command(create_task=lpb.CreateTask(spec=pb.TaskSpec(name="t", params_json='{"a":"x"}')))
    assert codec.command_format(task) == codec.SECRETS_FORMAT
    assert codec.command_format(plain) < codec.SECRETS_FORMAT
    wf = lpb.Command(
        apply_workflow=lpb.ApplyWorkflow(
            spec=pb.WorkflowSpec(
                name="w", tasks=[pb.WorkflowTaskSpec(name="a", env={"PW": "{{ secret.pw }}"})]
            )
        )
    )
    assert codec.command_format(wf) == codec.SECRETS_FORMAT
    run = lpb.Command(trigger_now=lpb.TriggerNow(name="t", params_json='{"a":"{{ secret.x y }}"}'))
    assert codec.command_format(run) == codec.SECRETS_FORMAT


# -- sources ----------------------------------------------------------------------------------------


def test_the_environment_comes_first_then_the_file(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("# comment\nexport db-password='from file'\nother=\"x\"\n\n")
    path.chmod(0o600)
    store = SecretStore(path, environ={"RAFTSCHED_SECRET_OTHER": "from env"})
    assert env_name("db-password") == "RAFTSCHED_SECRET_DB_PASSWORD"
    assert store.lookup("db-password") == "from file"
    assert store.lookup("other") == "from env"
    assert store.lookup("nope") is None
    assert sorted(store.values()) == ["from env", "from file", "x"]


def test_a_toml_file_and_a_directory_of_files(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('db_password = "p\\"w"\n')
    toml.chmod(0o640)
    assert SecretStore(toml, environ={}).lookup("db_password") == 'p"w'

    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "api-key").write_text("k3y\n")
    (folder / "..data").mkdir()  # Kubernetes' bookkeeping: skipped
    for f in folder.iterdir():
        f.chmod(0o700 if f.is_dir() else 0o400)
    (folder / "dangling").symlink_to(folder / "nowhere")  # skipped too
    store = SecretStore(folder, environ={})
    assert store.lookup("api-key") == "k3y"
    # A rotated secret is picked up at the next lookup.
    (folder / "api-key").chmod(0o600)
    (folder / "api-key").write_text("n3w-key\n")
    assert store.lookup("api-key") == "n3w-key"


def test_a_world_readable_or_malformed_file_is_refused_without_showing_values(tmp_path: Path) -> None:
    path = tmp_path / "secrets.env"
    path.write_text("pw=hunter2\n")
    path.chmod(0o644)
    with pytest.raises(InvalidSpec) as err:
        SecretStore(path)
    message = str(err.value)
    assert "readable by every user" in message and "0644" in message and "chmod o-rwx" in message
    assert str(path) in message
    path.chmod(0o600)
    path.write_text("pw=hunter2\nthis line hunter2 is wrong\n")
    with pytest.raises(InvalidSpec) as err:
        SecretStore(path)
    assert "line 2: not NAME=value" in str(err.value) and "hunter2" not in str(err.value)
    with pytest.raises(InvalidSpec, match="cannot read"):
        SecretStore(tmp_path / "absent")
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "pw").write_text("x")
    (folder / "pw").chmod(0o604)
    with pytest.raises(InvalidSpec, match="readable by every user"):
        SecretStore(folder)


def test_resolution_fills_params_and_env_and_names_a_missing_secret() -> None:
    store = SecretStore(environ={"RAFTSCHED_SECRET_PW": VALUE})
    params, env, used = resolve_attempt(
        json.dumps({"dsn": "user:{{ secret.pw }}@db", "n": 1}), {"PW": "{{ secret.pw }}", "X": "1"}, store
    )
    assert json.loads(params) == {"dsn": f"user:{VALUE}@db", "n": 1}
    assert env == {"PW": VALUE, "X": "1"} and used == [VALUE, VALUE]
    with pytest.raises(MissingSecret) as err:
        resolve_attempt('{"a":"{{ secret.db_password }}"}', {}, store)
    assert "secret 'db_password' is not set" in str(err.value)
    assert "RAFTSCHED_SECRET_DB_PASSWORD" in str(err.value)


# -- masking ----------------------------------------------------------------------------------------


def test_masking_covers_plain_json_escaped_and_cut_values() -> None:
    masker = Masker(['pa"ss', "abcdefgh"])
    assert masker.mask('x pa"ss y pa\\"ss') == f"x {MASK} y {MASK}"
    cut = "\u2026[truncated 100 bytes]\ndefgh and more"
    assert masker.mask_tail(cut) == f"\u2026[truncated 100 bytes]\n{MASK} and more"
    assert masker.mask_tail("no cut: defgh") == "no cut: defgh"


def test_the_log_filter_masks_messages_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    store = SecretStore(environ={"RAFTSCHED_SECRET_PW": VALUE})
    masking = MaskingFilter(store)
    handler = logging.Handler()
    seen: list[str] = []
    handler.emit = lambda record: seen.append(logging.Formatter().format(record))  # type: ignore[method-assign]
    handler.addFilter(masking)
    logger = logging.getLogger("raftsched.test_secrets")
    logger.addHandler(handler)
    try:
        logger.warning("value %s here", VALUE)
        try:
            raise RuntimeError(f"boom {VALUE}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    assert len(seen) == 2 and all(VALUE not in line for line in seen)
    assert "value *** here" in seen[0] and "boom ***" in seen[1]


# -- the executor -----------------------------------------------------------------------------------


def _item(exec_id: str, **fields: object) -> pb.WorkItem:
    return pb.WorkItem(
        execution_id=exec_id,
        run_id=exec_id.split("/")[0],
        task="t",
        nominal_ms=1000,
        shard=0,
        shards=1,
        attempt=1,
        epoch=1,
        **fields,  # type: ignore[arg-type]
    )


def test_the_executor_resolves_then_masks_what_it_reports(tmp_path: Path) -> None:
    """A command prints its secret on stdout and stderr and writes its hash to a file: the file
    proves the attempt saw the value, the reports hold only ***; a missing secret fails naming it."""
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'db_password = "{VALUE}"\n')
    secrets.chmod(0o600)
    out = tmp_path / "hash"
    endpoint = LoopbackEndpoint(epoch=1)
    ex = Executor(
        "loopback:1",
        "ex1",
        transport=MemoryTransport(endpoint),
        execution_log=MemoryExecutionLog(),
        secrets=secrets,
        data_dir=tmp_path / "ex1",  # its full-log files, not the working directory's
    )
    script = (
        "import hashlib, json, os, sys; pw = os.environ['PW']; "
        "print(pw); print('err', pw, file=sys.stderr); print(os.environ['RAFTSCHED_PARAMS']); "
        "assert json.loads(os.environ['RAFTSCHED_PARAMS'])['dsn'] == 'u:' + pw; "
        "assert not [k for k in os.environ if k.startswith('RAFTSCHED_SECRET_')]; "
        f"open({str(out)!r}, 'w').write(hashlib.sha256(pw.encode()).hexdigest())"
    )
    command = f'{sys.executable} -c "{script}"'
    os.environ["RAFTSCHED_SECRET_LEAKY"] = "env-only-value"
    try:

        async def scenario() -> None:
            async with endpoint.serving(ex):
                endpoint.push(
                    "ex1",
                    [
                        _item(
                            "t@1/0/1",
                            command=command,
                            env={"PW": "{{ secret.db_password }}"},
                            params_json='{"dsn":"u:{{ secret.db_password }}"}',
                        ),
                        _item("t@2/0/1", command="echo hi", params_json='{"a":"{{ secret.absent }}"}'),
                    ],
                )
                await endpoint.until(lambda: len(endpoint.reports) == 2)

        asyncio.run(scenario())
    finally:
        del os.environ["RAFTSCHED_SECRET_LEAKY"]
    by_id = {r.execution_id: r for r in endpoint.reports}
    ok, missing = by_id["t@1/0/1"], by_id["t@2/0/1"]
    assert ok.success, ok.error + ok.stderr_tail
    assert out.read_text() == hashlib.sha256(VALUE.encode()).hexdigest()
    # The full-log files hold what the tails hold: masked before either sees a byte.
    logs = {p.name: p.read_text() for p in (tmp_path / "ex1" / "logs").iterdir()}
    assert logs and not any(VALUE in text for text in logs.values()), logs
    assert any(text.startswith(f"{MASK}\n") for name, text in logs.items() if name.endswith(".stdout"))
    assert (
        VALUE not in repr(ok) and ok.stdout_tail.startswith(f"{MASK}\n") and f"err {MASK}" in ok.stderr_tail
    )
    assert '"dsn":"u:***"' in ok.stdout_tail
    assert not missing.success
    assert (
        "secret 'absent' is not set on this executor" in missing.error
        and "RAFTSCHED_SECRET_ABSENT" in missing.error
    )


def test_a_subprocess_does_not_inherit_the_secret_variables() -> None:
    os.environ["RAFTSCHED_SECRET_HIDDEN"] = "x"
    try:
        ctx = AttemptContext("t@1/0/1", "t@1", "t", 1000, 0, 1, 1)
        result = asyncio.run(SubprocessRunner().run("env", ctx))
    finally:
        del os.environ["RAFTSCHED_SECRET_HIDDEN"]
    assert result.success and "RAFTSCHED_SECRET_HIDDEN" not in result.stdout_tail


def test_a_stream_is_masked_whatever_the_chunk_boundaries() -> None:
    """For full output written to files as it comes: a value split across chunks is masked."""
    text = f"start {VALUE} middle {VALUE}{VALUE} end".encode()
    want = b"start *** middle ****** end"
    for size in range(1, len(text) + 1):
        stream = StreamMasker(Masker([VALUE]))
        out = b"".join(stream.feed(text[i : i + size]) for i in range(0, len(text), size)) + stream.flush()
        assert out == want, size
    assert StreamMasker(Masker([])).feed(b"as is") == b"as is"


def test_the_output_is_masked_before_the_tail_cuts_it() -> None:
    """A value that the 8 KiB tail would cut in two is masked whole, as the output is read."""
    ctx = AttemptContext("t@1/0/1", "t@1", "t", 1000, 0, 1, 1, secret_values=(VALUE,))
    filler = 8192 - len(MASK)
    command = f"printf '%s' '{VALUE}'; head -c {filler} /dev/zero | tr '\\0' x"
    result = asyncio.run(SubprocessRunner().run(command, ctx))
    assert result.success and result.stdout_tail == MASK + "x" * filler
    assert VALUE not in repr(ctx)


def test_task_and_workflow_files_name_the_line_of_a_bad_reference() -> None:
    """What `raftsched apply` and `raftsched workflow apply` (and the console) print."""
    from raftsched.workflow.files import parse_workflow_text
    from raftsched.workflow.taskfiles import parse_task_text

    task_file = 'tasks:\n  - name: a\n    command: "true"\n    params: {pw: "{{ secret.x y }}"}\n'
    with pytest.raises(InvalidSpec) as err:
        parse_task_text(task_file, "yaml", "t.yaml")
    assert "t.yaml:4: tasks[0].params.pw" in str(err.value) and "bad secret reference" in str(err.value)
    workflow = (
        "name: w\ntasks:\n  - name: a\n"
        + '    command: "echo {{ secret.pw }}"\n    env: {PW: "{{ secrets.pw }}"}\n'
    )
    with pytest.raises(InvalidSpec) as err:
        parse_workflow_text(workflow, "yaml", "w.yaml")
    text = str(err.value)
    assert "w.yaml:4: tasks[0].command" in text and "not allowed in a command" in text
    assert "w.yaml:5: tasks[0].env.PW" in text and "did you mean {{ secret.pw }}?" in text


def test_the_executor_program_refuses_a_world_readable_secrets_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from raftsched.cli.executor import executor_main

    path = tmp_path / "secrets.env"
    path.write_text("pw=hunter2\n")
    path.chmod(0o644)
    argv = [
        "--cluster",
        "127.0.0.1:1",
        "--name",
        "ex1",
        "--data-dir",
        str(tmp_path / "d"),
        "--secrets",
        str(path),
    ]
    assert executor_main(argv) == 2
    err = capsys.readouterr().err
    assert "readable by every user" in err and str(path) in err and "hunter2" not in err
