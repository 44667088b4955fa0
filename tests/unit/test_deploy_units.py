"""The shipped systemd units (deploy/systemd/) pass ``systemd-analyze verify`` without a warning, and
their command lines are ones our programs accept."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from raftsched.cli.executor import executor_parser
from raftsched.cli.node import node_parser

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))


def exec_start(unit: Path) -> list[str]:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def test_both_units_are_shipped() -> None:
    assert [u.name for u in UNITS] == ["raftsched-executor.service", "raftsched-node.service"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_systemd_analyze_verifies_the_unit(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing: tools/install-test-deps.sh installs Debian's systemd")
        pytest.skip("needs systemd-analyze (Debian package systemd)")
    program = shutil.which(exec_start(unit)[0].rsplit("/", 1)[1])
    assert program is not None, "the package's console scripts are not installed"
    copy = tmp_path / unit.name
    # Verify against where this machine installed the programs (the unit says /usr/local/bin).
    copy.write_text(unit.read_text().replace(exec_start(unit)[0], program))
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_the_command_line_is_one_the_program_accepts(unit: Path) -> None:
    argv = exec_start(unit)
    parser = node_parser() if argv[0].endswith("raftsched-node") else executor_parser()
    args = [a.replace("${RAFTSCHED_NODE_ID}", "n1").replace("%H", "host-1") for a in argv[1:]]
    parser.parse_args(args)  # exits (SystemExit) on an option the program does not take
