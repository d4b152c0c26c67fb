"""``lm_eval``: lm-evaluation-harness ``samples_<task>_<date>.jsonl`` (``--log_samples``).

One document a line: the task's row in ``doc``, the model's outputs in ``resps`` (one list per request; a
generation task with ``repeats: n`` has one request of ``n`` completions), the task's metric (``exact_match``)::

    {"doc_id": 0, "doc": {"problem": "...", "answer": "18"}, "target": "18", "resps": [["...", "..."]],
     "filtered_resps": ["18"], "exact_match": 1.0}

The metric is per document, so it is kept as upstream correctness only when the document has one completion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import Field

from pipeline.config import Model
from pipeline.rollout.layout import LAYOUTS, DumpRecord, Layout, LayoutError, Sample, correct, first_of, listed, text_of


@LAYOUTS.register
class LmEval(Layout):
    name = "lm_eval"
    format = "jsonl"
    grouped = True
    upstream = "the task's metric (per document: kept for single-sample documents only)"

    class Options(Model):
        question: list[str] = Field(["doc.problem", "doc.question", "doc.Problem", "doc.input"],
                                    description="fields holding the question (the first found; dotted paths into the row)")
        metric: str = Field("exact_match", description="the per-document metric read as upstream correctness")

    def read(self, row: dict[str, Any]) -> Iterator[DumpRecord]:
        resps = listed(first_of(row, ["resps"]), "resps")
        texts: list[str] = []
        for i, r in enumerate(resps):
            for j, t in enumerate(r if isinstance(r, list) else [r]):
                texts.append(text_of(t, f"resps[{i}][{j}]"))
        if not texts and resps:
            raise LayoutError("bad_field", "resps holds no completion")
        up = correct(row.get(self.options.metric)) if len(texts) == 1 else None
        doc_id = row.get("doc_id")
        target = row.get("target")
        yield DumpRecord([Sample(t, upstream_correct=up) for t in texts],
                         question=text_of(first_of(row, self.options.question), "the question"),
                         source_id=None if doc_id is None else str(doc_id),
                         answer=None if target is None else str(target))
