"""Regenerate raftsched/v1/*_pb2*.py from protos/ (the committed code must match; see tests)."""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent


def _protoc(*args: str) -> None:
    if protoc.main(["protoc", f"-I{ROOT / 'protos'}", *args]) != 0:
        raise SystemExit("protoc failed")


def generate(out_dir: Path) -> None:
    """Run protoc for every .proto under protos/ into ``out_dir`` (package layout mirrors protos/).

    Messages and stubs for every file; gRPC modules only for files that declare a service, so
    the log-format modules never pull in grpc.
    """
    files = sorted((ROOT / "protos").rglob("*.proto"))
    protos = [str(p.relative_to(ROOT / "protos")) for p in files]
    services = [
        str(p.relative_to(ROOT / "protos"))
        for p in files
        if any(line.startswith("service ") for line in p.read_text().splitlines())
    ]
    _protoc(f"--python_out={out_dir}", f"--pyi_out={out_dir}", *protos)
    if services:
        _protoc(f"--grpc_python_out={out_dir}", *services)


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
