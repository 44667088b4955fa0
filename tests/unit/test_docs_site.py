"""The documentation site builds strictly (a broken link, a missing anchor, a page outside the nav or
a reference that cannot be generated fails), and its generated references hold every CLI command,
config key and metric the code defines; every example is linked from a page."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.cli.executor import executor_parser
from raftsched.cli.node import node_parser
from raftsched.cli.parser import build_parser
from raftsched.config.reference import KEYS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "gen"))
import pages  # noqa: E402  (the generator, from docs/gen)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mkdocs") is None and not os.environ.get("CI"):
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    problems = [line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert done.returncode == 0 and not problems, done.stderr[-4000:]
    return out


def page_text(site: Path, page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text()))


def test_every_cli_command_and_option_has_an_entry(site: Path) -> None:
    text = page_text(site, "reference/cli-commands")
    for path, sub, _help in pages.cli_commands(build_parser(), "raftsched"):
        assert path in text, f"{path}: no entry in the CLI reference"
        for action in sub._actions:
            for option in action.option_strings:
                assert option in text, f"{path} {option}: not in the CLI reference"
    for parser in (node_parser(), executor_parser()):
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text, f"{parser.prog} {option}: not in the CLI reference"


def test_every_config_key_has_an_entry(site: Path) -> None:
    text = page_text(site, "reference/config-keys")
    for key in KEYS:
        assert key.path in text, f"{key.path}: no entry in the configuration reference"


def test_every_metric_has_an_entry(site: Path) -> None:
    text = page_text(site, "reference/metrics")
    families = pages.metric_families()
    assert len(families) > 30
    for name, *_rest in families:
        assert name in text, f"{name}: no entry in the metric reference"


def test_every_rpc_and_route_has_an_entry(site: Path) -> None:
    from raftsched.rpc import routes
    from raftsched.v1 import raftsched_pb2

    text = page_text(site, "reference/grpc")
    for service in raftsched_pb2.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            assert method.name in text, f"{method.name}: not in the gRPC reference"
    openapi = page_text(site, "reference/openapi")
    for route in routes.ROUTES:
        assert f"{routes.PREFIX}{route.path}" in openapi, f"{route.path}: not in the OpenAPI page"


def test_every_example_is_linked_from_the_docs() -> None:
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    for example in sorted((ROOT / "examples").rglob("*")):
        if example.is_file():
            rel = example.relative_to(ROOT).as_posix()
            assert rel in docs, f"{rel} is not linked from any docs page"


def test_no_page_is_a_placeholder() -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        assert "TODO" not in page.read_text(), f"{page.relative_to(ROOT)} is a placeholder"


def test_the_module_map_names_every_module_and_package() -> None:
    text = (ROOT / "docs" / "explanation" / "module-map.md").read_text()
    package = ROOT / "raftsched"
    for child in sorted(package.iterdir()):
        if (child.name.startswith("_") and child.name != "__init__.py") or child.name in ("v1", "py.typed"):
            continue
        if child.suffix == ".py" or (child.is_dir() and (child / "__init__.py").exists()):
            name = f"raftsched/{child.name}" + ("/" if child.is_dir() else "")
            assert name in text, f"{name} is missing from docs/explanation/module-map.md"


def test_the_readme_is_short_and_its_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#\s]+)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links {target}, which does not exist"


def test_the_changelog_keeps_its_shape() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    for heading in re.findall(r"^### (.+)$", text, re.M):
        assert heading in ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"), heading
