"""The docs site's reference pages, generated from the code that defines what they describe, so
they cannot drift from it: the CLI from the argparse parsers, the config keys from
:mod:`raftsched.config.reference`, the metrics from the metric sets, the gRPC API from the
protobuf descriptors (and the comments in ``protos/``), the task fields and integer ranges from
their tables. ``docs/gen/build.py`` writes them at ``mkdocs build`` time (mkdocs-gen-files);
``tests/unit/test_docs_site.py`` checks every command, key and metric has an entry.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GENERATED = "<!-- generated from the code by docs/gen/pages.py: edit the code, not this page -->\n\n"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:  # an alias
                    continue
                seen.add(id(sub))
                out.append((name, sub, helps.get(name, "")))
    return out


def cli_commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """Every command path under ``parser`` (``raftsched task add``), depth first, with its help."""
    for name, sub, help_text in _subparsers(parser):
        path = f"{prefix} {name}"
        yield path, sub, help_text
        yield from cli_commands(sub, path)


def _option_rows(parser: argparse.ArgumentParser, skip: set[str]) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction | argparse._VersionAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings and set(action.option_strings) & skip:
            continue
        metavar = action.metavar if isinstance(action.metavar, str) else None
        if action.option_strings:
            takes = action.nargs != 0
            shown = metavar or (action.dest.upper() if takes else "")
            name = ", ".join(f"`{o}{' ' + shown if shown else ''}`" for o in action.option_strings)
        else:
            name = f"`{metavar or action.dest.upper()}`"
        if action.choices and not isinstance(action, argparse._SubParsersAction):
            name += " (" + " \\| ".join(f"`{c}`" for c in action.choices) + ")"
        notes = []
        if action.required and action.option_strings:
            notes.append("required")
        rows.append(
            f"| {name} | {_cell(action.help or '')}{' (' + ', '.join(notes) + ')' if notes else ''} |"
        )
    return rows


def cli_page() -> str:
    from raftsched.cli.executor import executor_parser
    from raftsched.cli.node import node_parser
    from raftsched.cli.parser import _GLOBAL_OPTIONS, build_parser

    out = [
        "# CLI commands\n\n",
        GENERATED,
        "Every command and option of `raftsched`, `raftsched-node` and `raftsched-executor`, as their\n"
        "`--help` prints them. Conventions (times, durations, exit status, `--json`) are in\n"
        "[CLI conventions](cli.md).\n\n",
    ]
    main = build_parser()
    global_options = {o for o, _dest, _opts in _GLOBAL_OPTIONS} | {"--token", "--token-file"}
    out.append("## Global options of `raftsched`\n\nGiven before or after the command.\n\n")
    out.append("| option | meaning |\n|---|---|\n")
    out.extend(r + "\n" for r in _option_rows(main, set()))
    out.append("\n")
    for path, sub, help_text in cli_commands(main, "raftsched"):
        out.append(f"## `{path}`\n\n")
        text = sub.description or help_text
        if text:
            out.append(_cell(text) + "\n\n")
        usage = sub.format_usage().replace("usage: ", "").strip()
        out.append(f"```text\n{usage}\n```\n\n")
        rows = _option_rows(sub, global_options)
        if rows and not _subparsers(sub):
            out.append("| argument | meaning |\n|---|---|\n")
            out.extend(r + "\n" for r in rows)
            out.append("\n")
    for prog, parser in (("raftsched-node", node_parser()), ("raftsched-executor", executor_parser())):
        out.append(f"## `{prog}`\n\n{_cell(parser.description or '')}\n\n")
        out.append(f"```text\n{parser.format_usage().replace('usage: ', '').strip()}\n```\n\n")
        out.append("| argument | meaning |\n|---|---|\n")
        out.extend(r + "\n" for r in _option_rows(parser, set()))
        out.append("\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# config keys, metrics, task fields, limits
# --------------------------------------------------------------------------------------------


def config_page() -> str:
    from raftsched.config.reference import KEYS

    out = [
        "# Configuration keys\n\n",
        GENERATED,
        "Every key of the cluster config file (`cluster.toml`), from `raftsched/config/reference.py`.\n"
        "How the file is read, what is replicated and what is node-local: [Configuration](config.md).\n"
        "Durations and sizes: [Durations and times](durations.md).\n\n",
    ]
    section = ""
    for key in KEYS:
        top = key.path.split(".", 1)[0]
        if top != section:
            section = top
            out.append(
                f"\n## `[{section.rstrip('[]')}]`\n\n| key | type | default | meaning |\n|---|---|---|---|\n"
            )
        default = key.default if key.default.startswith("—") else f"`{key.default}`"
        out.append(f"| `{key.path}` | {key.type} | {default} | {_cell(key.meaning)} |\n")
    return "".join(out)


def metric_families() -> list[tuple[str, str, str, tuple[str, ...], str]]:
    """(name, type, help, labels, where) of every metric a node or an executor exports."""
    from raftsched.fsm.tally import ApplyTally
    from raftsched.observability.executor_metrics import ExecutorMetrics, ExecutorSample
    from raftsched.observability.node_metrics import NodeMetrics, NodeSample

    node = NodeMetrics("n1", NodeSample, ApplyTally()).set.describe()
    executor = ExecutorMetrics("ex1", ExecutorSample).set.describe()
    return [(*f, "node") for f in node] + [(*f, "executor") for f in executor]


def metrics_page() -> str:
    out = [
        "# Metrics\n\n",
        GENERATED,
        "Every metric a node (label `node`) or an executor (label `executor`) exports at `/metrics`,\n"
        "from the metric sets in `raftsched/observability/`. What they mean in operation, the PromQL\n"
        "to alert on and what they cost: [Monitor](../guide/monitor.md). Every process also exports\n"
        "`raftsched_process_*` (CPU seconds, resident memory, open fds, start time).\n\n",
    ]
    for where in ("node", "executor"):
        out.append(f"## {where.capitalize()}\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n")
        for name, kind, help_text, labels, w in metric_families():
            if w == where:
                shown = ", ".join(f"`{label}`" for label in labels) or "—"
                out.append(f"| `{name}` | {kind} | {shown} | {_cell(help_text)} |\n")
        out.append("\n")
    return "".join(out)


def task_fields_page() -> str:
    from raftsched import bounds, taskfields

    return (
        "# Task fields and limits\n\n"
        + GENERATED
        + "Every field of a task (task files, the CLI's flags, the SDK), from `raftsched/taskfields.py`;\n"
        "how task files are written: [Task files](task-files.md).\n\n"
        + taskfields.markdown_table()
        + "\n\n## Integer fields\n\nThe range of every integer field of the API, from `raftsched/bounds.py`; "
        "a value outside it is refused with INVALID_ARGUMENT naming the field and the range.\n\n"
        + bounds.markdown_table()
        + "\n"
    )


# --------------------------------------------------------------------------------------------
# gRPC
# --------------------------------------------------------------------------------------------


def _proto_comments() -> dict[tuple[str, str], str]:
    """(message or service, field or rpc) → the trailing comment in protos/ (what descriptors lose)."""
    out: dict[tuple[str, str], str] = {}
    for path in sorted((ROOT / "protos").rglob("*.proto")):
        block = ""
        for line in path.read_text().splitlines():
            m = re.match(r"\s*(message|service|enum)\s+(\w+)", line)
            if m:
                block = m.group(2)
                continue
            m = re.match(r"\s*(?:rpc\s+(\w+)|[\w.<>, ]+?\s(\w+)\s*=\s*\d+).*?//\s*(.*)$", line)
            if m and block:
                out[(block, m.group(1) or m.group(2))] = m.group(3).strip()
    return out


def grpc_page() -> str:
    from raftsched.v1 import raftsched_pb2

    comments = _proto_comments()
    fd = raftsched_pb2.DESCRIPTOR
    out = [
        "# gRPC API\n\n",
        GENERATED,
        "The services of `protos/raftsched/v1/raftsched.proto` (package `raftsched.v1`), from the\n"
        "compiled descriptors. Every node serves them on its gRPC port, with gRPC health\n"
        "(`grpc.health.v1.Health`) and reflection. The Python SDK (`raftsched.Client`) wraps Admin;\n"
        "the same calls over HTTP/JSON: [HTTP API](http.md).\n\n",
    ]
    used: list[str] = []
    for service in fd.services_by_name.values():
        out.append(
            f"## Service `{service.full_name}`\n\n| rpc | request | reply | note |\n|---|---|---|---|\n"
        )
        for method in service.methods:
            req = method.input_type.name
            rep = method.output_type.name
            stream = "stream " if method.server_streaming else ""
            cstream = "stream " if method.client_streaming else ""
            used.extend([req, rep])
            note = comments.get((service.name, method.name), "")
            out.append(
                f"| `{method.name}` | {cstream}[`{req}`](#{req.lower()}) "
                f"| {stream}[`{rep}`](#{rep.lower()}) | {_cell(note)} |\n"
            )
        out.append("\n")
    out.append("## Messages\n\n")
    for name in sorted(fd.message_types_by_name):
        msg = fd.message_types_by_name[name]
        out.append(f"### {name}\n\n")
        if not msg.fields:
            out.append("No fields.\n\n")
            continue
        out.append("| field | number | type | note |\n|---|---|---|---|\n")
        for field in msg.fields:
            if field.message_type is not None:
                kind = field.message_type.name
                if field.message_type.GetOptions().map_entry:
                    k, v = field.message_type.fields
                    kind = f"map<{_type_name(k)}, {_type_name(v)}>"
                    label = ""
                else:
                    label = "repeated " if field.is_repeated else ""
            else:
                kind = _type_name(field)
                label = "repeated " if field.is_repeated else ""
            note = comments.get((name, field.name), "")
            out.append(f"| `{field.name}` | {field.number} | {label}`{kind}` | {_cell(note)} |\n")
        out.append("\n")
    out.append("## Enums\n\n")
    for name in sorted(fd.enum_types_by_name):
        enum = fd.enum_types_by_name[name]
        values = ", ".join(f"`{v.name}` = {v.number}" for v in enum.values)
        out.append(f"### {name}\n\n{values}\n\n")
    return "".join(out)


def _type_name(field: object) -> str:
    from google.protobuf.descriptor import FieldDescriptor

    assert isinstance(field, FieldDescriptor)
    if field.message_type is not None:
        return str(field.message_type.name)
    if field.enum_type is not None:
        return str(field.enum_type.name)
    names = {
        FieldDescriptor.TYPE_DOUBLE: "double",
        FieldDescriptor.TYPE_FLOAT: "float",
        FieldDescriptor.TYPE_INT64: "int64",
        FieldDescriptor.TYPE_UINT64: "uint64",
        FieldDescriptor.TYPE_INT32: "int32",
        FieldDescriptor.TYPE_UINT32: "uint32",
        FieldDescriptor.TYPE_BOOL: "bool",
        FieldDescriptor.TYPE_STRING: "string",
        FieldDescriptor.TYPE_BYTES: "bytes",
        FieldDescriptor.TYPE_SINT64: "sint64",
        FieldDescriptor.TYPE_SINT32: "sint32",
        FieldDescriptor.TYPE_FIXED64: "fixed64",
        FieldDescriptor.TYPE_FIXED32: "fixed32",
    }
    return names.get(field.type, str(field.type))


def pysyncobj_page() -> str:
    from raftsched.consensus.pysyncobj.patches import PATCHES, PINNED_VERSION

    out = [
        "# What we learned about pysyncobj\n\n",
        GENERATED,
        f"raftsched replicates through pysyncobj {PINNED_VERSION} (pinned). It is small and readable, "
        "but it has no hooks for what a scheduler needs, and several of its Raft paths break safety "
        "or liveness under the faults the chaos suite injects. What raftsched does about it:\n\n"
        "* **One replicated entry point, no pickle as our format.** Every command is our own "
        "protobuf (`protos/raftsched/v1/log.proto`), passed through one `@replicated` method; "
        "the Raft port is encrypted and authenticated with `cluster.secret` (without it pysyncobj "
        "would unpickle whatever reaches the port: remote code execution), so a node refuses to "
        "start without one.\n"
        "* **No exception escapes apply.** An exception inside a replicated method stops that node "
        "applying for good, on every node at once; apply turns every rejection into a value "
        "(see [Semantics](semantics.md)).\n"
        "* **Sync calls are not used on the hot path.** A synchronous replicated call waits for "
        "the next batch (about 100 ms in batch mode); the leader proposes asynchronously and "
        "waits on commit callbacks.\n"
        "* **Every private member we touch is in a ledger.** The table below is "
        "`raftsched/consensus/pysyncobj/patches.py`; `tests/unit/test_raft_patches.py` fails when "
        "an upgrade of pysyncobj renames or drops a member, instead of silently un-patching a "
        "safety fix.\n\n",
        "| patch | kind | why | found by |\n|---|---|---|---|\n",
    ]
    for patch in PATCHES:
        out.append(f"| `{patch.name}` | {patch.kind} | {_cell(patch.reason)} | {_cell(patch.reference)} |\n")
    return "".join(out)


PAGES = {
    "reference/cli-commands.md": cli_page,
    "reference/config-keys.md": config_page,
    "reference/metrics.md": metrics_page,
    "reference/task-fields.md": task_fields_page,
    "reference/grpc.md": grpc_page,
    "explanation/pysyncobj.md": pysyncobj_page,
}
