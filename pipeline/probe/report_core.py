"""The probe's reports, pure: a feature-based shortcut probe, feature drift between checkpoints, enrichment.

Everything here takes arrays and returns plain dicts (no files, no models); :mod:`pipeline.probe.report_stage` is the
shell that feeds it real activations. Per-rollout vectors come from a T-SAE's high-level codes
(tokens x n_high) and the rollouts' rows (``starts``, ``lengths``)::

    >>> v = rollout_vectors(codes, starts=starts, lengths=lengths, answer_mask=mask, top_k=8)
    >>> cross_validate(np.hstack([v.mean, v.answer]), y, folds=5, seed=0)["f1"]
    0.42
    >>> feature_drift(base_codes, trained_codes, starts=starts, lengths=lengths)["summary"]
    {"mean_abs_delta_mean": 0.031, "cosine_mean_codes": 0.97, ...}

- :func:`cross_validate`: L2-regularised logistic regression (Newton's method, features standardised on the
  training fold), stratified k-fold; the decision threshold is chosen inside each training fold (the F1-best
  threshold over an inner 3-fold split's out-of-fold scores), so no test row decides its own threshold.
- :func:`feature_drift`: the same SAE's codes of the same tokens under two models; per-feature change of the
  mean activation and of the firing rate, the features that moved most and the tokens where each fires hardest.
- :func:`enrichment`: per group (a band, correct vs failed), each feature's log odds ratio of being in a rollout's
  top-k against the other rollouts, with a 95 % Wald interval (0.5 added to each cell).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class RolloutVectors:
    """Per rollout (N rows) over the high-level features (H columns)."""

    mean: np.ndarray  # N x H: mean activation over the completion's tokens
    answer: np.ndarray  # N x H: mean over the answer span's tokens (0 where the rollout has none)
    has_answer: np.ndarray  # N bool
    top: np.ndarray  # N x H bool: in the rollout's top_k by mean (as the features table keeps them), active somewhere
    fires: np.ndarray  # N x H: fraction of the completion's tokens on which the feature is active


def rollout_vectors(codes: np.ndarray, *, starts: np.ndarray, lengths: np.ndarray, answer_mask: np.ndarray,
                    top_k: int = 8) -> RolloutVectors:
    """Per-rollout mean, answer-span mean, top-k membership and firing rate of each high-level feature."""
    n, h = len(starts), codes.shape[1]
    mean, answer, fires = np.zeros((n, h)), np.zeros((n, h)), np.zeros((n, h))
    top = np.zeros((n, h), dtype=bool)
    has = np.zeros(n, dtype=bool)
    for i in range(n):
        s, m = int(starts[i]), int(lengths[i])
        if m == 0:
            continue
        c = np.asarray(codes[s: s + m], dtype=np.float64)
        mean[i] = c.mean(0)
        fires[i] = (c > 0).mean(0)
        order = np.lexsort((np.arange(h), -mean[i]))[:top_k]
        top[i, order[c.max(0)[order] > 0]] = True
        a = answer_mask[s: s + m]
        if a.any():
            has[i] = True
            answer[i] = c[a].mean(0)
    return RolloutVectors(mean=mean, answer=answer, has_answer=has, top=top, fires=fires)


# -- the logistic probe ---------------------------------------------------------------------------------------------

def fit_logistic(x: np.ndarray, y: np.ndarray, *, l2: float = 1.0, iters: int = 50) -> tuple[np.ndarray, float]:
    """Weights and bias minimising the mean log loss + ``l2 / (2 n)`` ||w||² (the bias unpenalised), by Newton."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0
    y = y.astype(np.float64)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -30, 30)))
        grad = xb.T @ (p - y) + reg * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def _standardise(train: np.ndarray, *others: np.ndarray):
    mu, sd = train.mean(0), train.std(0)
    sd[sd < 1e-12] = 1.0
    return [(a - mu) / sd for a in (train, *others)]


def _scores(x_train, y_train, x_test, *, l2: float) -> np.ndarray:
    xt, xs = _standardise(x_train, x_test)
    w, b = fit_logistic(xt, y_train, l2=l2)
    return xs @ w + b


def stratified_folds(y: np.ndarray, k: int, *, seed: int) -> np.ndarray:
    """A fold number per row: each class shuffled and dealt round-robin, so every fold holds ~1/k of each class."""
    rng = np.random.default_rng(seed)
    fold = np.zeros(len(y), dtype=np.int64)
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        fold[rng.permutation(idx)] = np.arange(len(idx)) % k
    return fold


def best_threshold(scores: np.ndarray, y: np.ndarray) -> float:
    """The score threshold (predict positive when score >= it) with the best F1 on (scores, y); ties: the higher."""
    best, at = -1.0, float("inf")
    pos = int(y.sum())
    for t in np.unique(scores)[::-1]:
        pred = scores >= t
        tp = int((pred & (y == 1)).sum())
        f1 = 2 * tp / (pred.sum() + pos) if pos else 0.0
        if f1 > best:
            best, at = f1, float(t)
    return at


def prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": f1}


def cross_validate(x: np.ndarray, y: Sequence[bool], *, folds: int = 5, seed: int = 0, l2: float = 1.0,
                   inner_folds: int = 3) -> dict:
    """Stratified k-fold precision/recall/F1 of the logistic probe (counts pooled over the test folds).

    The threshold of each fold is the F1-best one over an inner ``inner_folds`` split of its training rows.
    With fewer than 2 positives (or negatives) there is nothing to cross-validate: ``{"skipped": reason}``.
    """
    y = np.asarray(y, dtype=np.int64)
    n_pos, n = int(y.sum()), len(y)
    out = {"rows": n, "positives": n_pos, "prevalence": n_pos / n if n else None}
    if min(n_pos, n - n_pos) < 2:
        return {**out, "skipped": f"{n_pos} positives and {n - n_pos} negatives: too few to cross-validate"}
    k = min(folds, n_pos, n - n_pos)
    fold = stratified_folds(y, k, seed=seed)
    tp = fp = fn = 0
    thresholds = []
    for f in range(k):
        tr, te = fold != f, fold == f
        xtr, ytr = x[tr], y[tr]
        ki = min(inner_folds, int(ytr.sum()), int((1 - ytr).sum()))
        if ki >= 2:
            inner = stratified_folds(ytr, ki, seed=seed + 1 + f)
            oof = np.zeros(len(ytr))
            for g in range(ki):
                oof[inner == g] = _scores(xtr[inner != g], ytr[inner != g], xtr[inner == g], l2=l2)
            thr = best_threshold(oof, ytr)
        else:
            thr = 0.0  # probability 0.5
        thresholds.append(thr)
        pred = _scores(xtr, ytr, x[te], l2=l2) >= thr
        tp += int((pred & (y[te] == 1)).sum())
        fp += int((pred & (y[te] == 0)).sum())
        fn += int((~pred & (y[te] == 1)).sum())
    return {**out, "folds": k, **prf(tp, fp, fn), "thresholds": [round(t, 4) for t in thresholds]}


# -- drift ------------------------------------------------------------------------------------------------------------

def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(a @ b / (na * nb))


def feature_drift(base: np.ndarray, trained: np.ndarray, *, starts: np.ndarray | None = None,
                  lengths: np.ndarray | None = None, top: int = 10, per_feature: int = 3) -> dict:
    """How one SAE's high-level codes of the same tokens moved from ``base`` to ``trained`` (tokens x H each).

    Returns ``summary`` (mean |Δ mean activation| and |Δ firing rate| over features, the cosine of the two mean
    code vectors, the mean per-token cosine, the share of tokens whose top feature changed), ``features`` (per
    feature: mean and firing rate under each model and their change) and ``top`` (the ``top`` features with the
    largest |Δ mean|, each with the token rows where it fires hardest under the trained model and under the base,
    one per rollout when ``starts``/``lengths`` are given).
    """
    base = np.asarray(base, dtype=np.float64)
    trained = np.asarray(trained, dtype=np.float64)
    if base.shape != trained.shape:
        raise ValueError(f"base codes {base.shape} and trained codes {trained.shape}: the same tokens are needed")
    mb, mt = base.mean(0), trained.mean(0)
    rb, rt = (base > 0).mean(0), (trained > 0).mean(0)
    dm, dr = mt - mb, rt - rb
    tok_cos = [_cos(a, b) for a, b in zip(base, trained, strict=True)]
    active = (base.max(1) > 0) | (trained.max(1) > 0)
    argb, argt = base.argmax(1), trained.argmax(1)
    summary = {"tokens": len(base), "features": base.shape[1],
               "mean_abs_delta_mean": float(np.abs(dm).mean()), "mean_abs_delta_rate": float(np.abs(dr).mean()),
               "mean_activation_base": float(mb.mean()), "relative_abs_delta_mean":
               float(np.abs(dm).sum() / mb.sum()) if mb.sum() > 0 else 0.0,
               "cosine_mean_codes": _cos(mb, mt), "mean_token_cosine": float(np.mean(tok_cos)) if tok_cos else 1.0,
               "top_feature_changed": float((argb != argt)[active].mean()) if active.any() else 0.0}
    features = [{"feature": f, "mean_base": float(mb[f]), "mean_trained": float(mt[f]), "delta_mean": float(dm[f]),
                 "rate_base": float(rb[f]), "rate_trained": float(rt[f]), "delta_rate": float(dr[f])}
                for f in range(base.shape[1])]
    seq = None if starts is None else np.repeat(np.arange(len(starts)), lengths)
    chosen = np.lexsort((np.arange(len(dm)), -np.abs(dm)))[:top]
    tops = []
    for f in chosen:
        if dm[f] == 0:
            break
        tops.append({**features[int(f)], "rows_trained": _hardest(trained[:, f], seq, per_feature),
                     "rows_base": _hardest(base[:, f], seq, per_feature)})
    return {"summary": summary, "features": features, "top": tops}


def _hardest(col: np.ndarray, seq: np.ndarray | None, n: int) -> list[int]:
    rows, seen = [], set()
    for t in np.argsort(-col, kind="stable"):
        if col[t] <= 0 or len(rows) == n:
            break
        s = None if seq is None else int(seq[t])
        if s is not None and s in seen:
            continue
        seen.add(s)
        rows.append(int(t))
    return rows


# -- enrichment -------------------------------------------------------------------------------------------------------

def log_odds(a: int, b: int, c: int, d: int, *, z: float = 1.96) -> tuple[float, float, float]:
    """Log odds ratio of a 2x2 table (a: in group and present, b: in group and absent, c, d: the rest), with 0.5
    added to each cell, and its Wald interval."""
    a, b, c, d = a + 0.5, b + 0.5, c + 0.5, d + 0.5
    lo = math.log(a * d / (b * c))
    se = math.sqrt(1 / a + 1 / b + 1 / c + 1 / d)
    return lo, lo - z * se, lo + z * se


def enrichment(present: np.ndarray, groups: Sequence[str], *, min_count: int = 5, top: int = 5) -> dict:
    """Per group: the ``top`` features most enriched in its rollouts against all the others (log odds of being
    ``present``, with a 95 % interval), among those present in at least ``min_count`` of the group's rollouts."""
    groups = np.asarray(groups)
    out = {}
    for g in sorted(set(groups.tolist())):
        ing = groups == g
        n_in, n_out = int(ing.sum()), int((~ing).sum())
        rows = []
        for f in range(present.shape[1]):
            a = int(present[ing, f].sum())
            c = int(present[~ing, f].sum())
            if a < min_count:
                continue
            lo, lo_ci, hi_ci = log_odds(a, n_in - a, c, n_out - c)
            rows.append({"feature": f, "in_group": a, "group_rollouts": n_in, "share": a / n_in,
                         "share_rest": c / n_out if n_out else None, "log_odds": lo, "ci": [lo_ci, hi_ci]})
        rows.sort(key=lambda r: (-r["log_odds"], r["feature"]))
        out[str(g)] = {"rollouts": n_in, "features": rows[:top],
                       "significant": sum(1 for r in rows if r["ci"][0] > 0)}
    return out


__all__ = ["RolloutVectors", "best_threshold", "cross_validate", "enrichment", "feature_drift", "fit_logistic",
           "log_odds", "prf", "rollout_vectors", "stratified_folds"]
