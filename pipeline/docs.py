"""Generate the column tables of docs/tables.md from schemas/*.yaml: ``python -m pipeline.docs`` rewrites
them, ``python -m pipeline.docs --check`` fails when the page and schemas disagree."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pipeline.io import atomic_write_text
from pipeline.schema import TABLES, schema

PAGE = Path(__file__).resolve().parent.parent / "docs" / "tables.md"

BEGIN = "<!-- tables:begin (generated from schemas/*.yaml by `python -m pipeline.docs`; do not edit) -->"
END = "<!-- tables:end -->"


def tables_markdown() -> str:
    parts = []
    for name in TABLES:
        s = schema(name)
        parts.append(f"### `{name}`\n\n{s.description} Key: `({', '.join(s.key)})`.\n\n{s.markdown()}\n")
    return "\n".join(parts)


def render(page: str) -> str:
    block = f"{BEGIN}\n\n{tables_markdown()}\n{END}"
    if BEGIN in page and END in page:
        return re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, page, flags=re.S)
    return page.rstrip("\n") + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--page", type=Path, default=PAGE, help="the Markdown page holding the tables")
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    args = ap.parse_args(argv)
    text = args.page.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print(f"{args.page}: column tables disagree with schemas/: run python -m pipeline.docs", file=sys.stderr)
            return 1
        return 0
    atomic_write_text(args.page, new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
