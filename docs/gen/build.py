"""mkdocs-gen-files script (mkdocs.yml): write the generated reference pages at build time."""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]  # these pages, and this checkout's raftsched
import pages  # noqa: E402  (after the path)

for path, render in pages.PAGES.items():
    with mkdocs_gen_files.open(path, "w") as f:
        f.write(render())
