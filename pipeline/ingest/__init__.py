"""Ingest stage: read every configured source, check, key, fold duplicates, write problems + rejects.

Streaming with bounded memory: rows are checked one at a time as the sources yield them
(JSONL in bounded reads, Parquet in batches), spooled to Parquet files in a temp folder, folded
in DuckDB over their narrow columns, and the shards written as the fold streams them out
(:mod:`pipeline.ingest.fold`). Nothing is written until
every source has been read, so a source that fails leaves the previous outputs as they were.
"""

from __future__ import annotations

from pipeline.ingest.stage import REASONS, SOURCES, IngestResult, IngestSummary, SourceError, ingest, limits_of, run

__all__ = ["REASONS", "SOURCES", "IngestResult", "IngestSummary", "SourceError", "ingest", "limits_of", "run"]
