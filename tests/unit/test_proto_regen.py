"""The committed generated code must be exactly what protoc makes from protos/ (no hand edits, no drift)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools (test extra) missing"
)
def test_generated_code_matches_protos(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import genproto  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    genproto.generate(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert generated, "protoc produced nothing"
    for rel in generated:
        committed = ROOT / rel
        assert committed.exists(), f"{rel} is generated but not committed"
        assert committed.read_bytes() == (tmp_path / rel).read_bytes(), (
            f"{rel} differs from protoc output: run `python tools/genproto.py` and commit"
        )
