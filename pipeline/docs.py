"""Generate README.md's column tables from schemas/*.yaml: ``python -m pipeline.docs`` rewrites them,
``python -m pipeline.docs --check`` fails when README and schemas disagree."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pipeline.schema import TABLES, schema

BEGIN = "<!-- tables:begin (generated from schemas/*.yaml by `python -m pipeline.docs`; do not edit) -->"
END = "<!-- tables:end -->"


def tables_markdown() -> str:
    parts = []
    for name in TABLES:
        s = schema(name)
        parts.append(f"### `{name}`\n\n{s.description} Key: `({', '.join(s.key)})`.\n\n{s.markdown()}\n")
    return "\n".join(parts)


def render(readme: str) -> str:
    block = f"{BEGIN}\n\n{tables_markdown()}\n{END}"
    if BEGIN in readme and END in readme:
        return re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, readme, flags=re.S)
    return readme.rstrip("\n") + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--readme", type=Path, default=Path(__file__).resolve().parent.parent / "README.md")
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md is out of date")
    args = ap.parse_args(argv)
    text = args.readme.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("README.md column tables disagree with schemas/: run python -m pipeline.docs", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
