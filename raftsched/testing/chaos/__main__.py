"""``python -m raftsched.testing.chaos``: the CI-sized chaos run; prints figures and report as JSON.

Exit status 0 when the checker found no violation and no skew finding, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from raftsched.testing.chaos.harness import run_chaos


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="raftsched-chaos-") as tmp:
        result = run_chaos(Path(tmp), progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    print(result.describe(), file=sys.stderr)
    print(json.dumps({"figures": result.figures, "report": result.report.as_dict()}, indent=2))
    return 0 if result.report.ok and not result.report.skew_findings else 1


if __name__ == "__main__":
    sys.exit(main())
