"""Regenerate raftsched/v1/*_pb2*.py from protos/ (the committed code must match; see tests)."""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent


def generate(out_dir: Path) -> None:
    """Run protoc for every .proto under protos/ into ``out_dir`` (package layout mirrors protos/)."""
    protos = sorted(str(p.relative_to(ROOT / "protos")) for p in (ROOT / "protos").rglob("*.proto"))
    args = [
        "protoc",
        f"-I{ROOT / 'protos'}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
