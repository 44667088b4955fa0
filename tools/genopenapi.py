"""Regenerate raftsched/rpc/openapi.json from the route table and the protos (see
raftsched/rpc/openapi.py; tests/unit/test_http_api.py checks the committed file matches)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from raftsched.rpc import openapi  # noqa: E402  (after the path: this checkout's code)

TARGET = ROOT / "raftsched" / "rpc" / openapi.FILE


def main() -> int:
    TARGET.write_bytes(openapi.render())
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
