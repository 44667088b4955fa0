"""Rewrite the README's generated tables from the code that declares them: 'Integer fields' from
raftsched.bounds (tests/unit/test_bounds.py checks the README holds ``bounds.markdown_table()``)
and 'Task fields' from raftsched.taskfields (tests/unit/test_taskfields.py).

Usage: python tools/readme_tables.py
"""

from __future__ import annotations

from pathlib import Path

from raftsched import bounds, taskfields

# Each table: the line it starts with, and the code that writes it.
TABLES = (
    ("| range | unset (0) means | fields |\n", bounds.markdown_table),
    ("| task file key | workflow task key |", taskfields.markdown_table),
)


def main() -> None:
    readme = Path(__file__).resolve().parents[1] / "README.md"
    text = readme.read_text()
    for header, table in TABLES:
        start = text.index(header)
        end = text.find("\n\n", start)
        end = len(text) if end < 0 else end + 1
        text = text[:start] + table() + text[end:]
    readme.write_text(text)


if __name__ == "__main__":
    main()
