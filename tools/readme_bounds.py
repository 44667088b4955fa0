"""Rewrite the README's 'Integer fields' table from raftsched.bounds (tests/unit/test_bounds.py
checks the README holds exactly ``bounds.markdown_table()``).

Usage: python tools/readme_bounds.py
"""

from __future__ import annotations

from pathlib import Path

from raftsched import bounds

HEADER = "| range | unset (0) means | fields |\n"


def main() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    text = readme.read_text()
    start = text.index(HEADER)
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end + 1
    readme.write_text(text[:start] + bounds.markdown_table() + text[end:])


if __name__ == "__main__":
    main()
