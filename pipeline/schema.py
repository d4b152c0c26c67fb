"""Table schemas, declared once in ``schemas/<table>.yaml`` and derived everywhere else.

From one declaration this module derives the Arrow schema every writer passes, the
validation every reader applies, the DuckDB view column list and the Markdown column
tables in README.md::

    >>> schema("rollouts").key
    ('problem_id', 'policy_id', 'sample_idx')
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import yaml

from pipeline.errors import PassbandError

TABLES = ("problems", "rejects", "policies", "rollouts", "verdicts", "flags", "difficulty", "features", "upstream")

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


_DUCKDB = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INTEGER", "float64": "DOUBLE",
           "bool": "BOOLEAN", "timestamp": "TIMESTAMPTZ"}


class SchemaError(PassbandError):
    """A table does not match its declaration."""


def _schema_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "schemas", here.parent / "schemas"):
        if candidate.is_dir():
            return candidate
    raise SchemaError(f"schema declarations not found next to {here}")


def parse_type(text: str) -> pa.DataType:
    """Parse ``string``, ``list<T>`` or ``map<K, V>`` into an Arrow type."""
    text = text.strip()
    if text in _PRIMITIVES:
        return _PRIMITIVES[text]
    if m := re.fullmatch(r"list<(.+)>", text):
        return pa.list_(parse_type(m.group(1)))
    if m := re.fullmatch(r"map<([^,]+),(.+)>", text):
        return pa.map_(parse_type(m.group(1)), parse_type(m.group(2)))
    raise SchemaError(f"unknown column type {text!r}; known: {sorted(_PRIMITIVES)}, list<T>, map<K, V>")


def duckdb_type(text: str) -> str:
    """The DuckDB type of a declared column type."""
    text = text.strip()
    if text in _DUCKDB:
        return _DUCKDB[text]
    if m := re.fullmatch(r"list<(.+)>", text):
        return duckdb_type(m.group(1)) + "[]"
    if m := re.fullmatch(r"map<([^,]+),(.+)>", text):
        return f"MAP({duckdb_type(m.group(1))}, {duckdb_type(m.group(2))})"
    raise SchemaError(f"unknown column type {text!r}")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    description: str

    @property
    def arrow_type(self) -> pa.DataType:
        return parse_type(self.type)


@dataclass(frozen=True)
class TableSchema:
    name: str
    description: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @functools.cached_property
    def arrow(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns],
            metadata={"passband.table": self.name},
        )

    def empty(self) -> pa.Table:
        return self.arrow.empty_table()

    def validate(self, table: pa.Table, *, where: str = "") -> pa.Table:
        """Return ``table`` cast to the declared schema; raise on missing/extra columns or nulls."""
        where = f" ({where})" if where else ""
        got, want = set(table.column_names), set(self.names)
        if missing := sorted(want - got):
            raise SchemaError(f"table {self.name}{where}: missing columns {missing}")
        if extra := sorted(got - want):
            raise SchemaError(f"table {self.name}{where}: unexpected columns {extra}")
        table = table.select(self.names)
        for col in self.columns:
            if not col.nullable and table.column(col.name).null_count:
                raise SchemaError(f"table {self.name}{where}: column {col.name!r} has nulls")
        try:
            return table.cast(self.arrow)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"table {self.name}{where}: {exc}") from exc

    def from_rows(self, rows: list[dict]) -> pa.Table:
        """Build a table from dict rows with the declared schema (never inferred)."""
        if rows:
            extra = set().union(*(r.keys() for r in rows)) - set(self.names)
            if extra:
                raise SchemaError(f"table {self.name}: unexpected columns {sorted(extra)}")
        table = pa.Table.from_pylist(rows, schema=self.arrow) if rows else self.empty()
        return self.validate(table)

    def empty_select(self) -> str:
        """A typed, empty SELECT with this table's columns (the view of a table with no shards yet)."""
        cols = ", ".join(f"CAST(NULL AS {duckdb_type(c.type)}) AS {c.name}" for c in self.columns)
        return f"SELECT {cols} LIMIT 0"

    def markdown(self) -> str:
        """The column table that README.md shows for this table."""
        lines = ["| column | type | null | description |", "|---|---|---|---|"]
        for c in self.columns:
            desc = c.description.replace("|", "\\|")
            lines.append(f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {desc} |")
        return "\n".join(lines)


@functools.cache
def schema(name: str) -> TableSchema:
    """The declared schema of table ``name``."""
    if name not in TABLES:
        raise SchemaError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
    raw = yaml.safe_load((_schema_dir() / f"{name}.yaml").read_text())
    cols = tuple(Column(c["name"], c["type"], bool(c["nullable"]), c["description"]) for c in raw["columns"])
    result = TableSchema(raw["name"], raw["description"], tuple(raw["key"]), cols)
    if result.name != name:
        raise SchemaError(f"schemas/{name}.yaml declares table {result.name!r}")
    unknown_key = set(result.key) - set(result.names)
    if unknown_key:
        raise SchemaError(f"table {name}: key columns {sorted(unknown_key)} are not declared")
    for c in cols:
        parse_type(c.type)
    return result


__all__ = ["TABLES", "Column", "SchemaError", "TableSchema", "duckdb_type", "parse_type", "schema"]
