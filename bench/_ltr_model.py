"""The model of ``search_ltr``: what it reads of each query, its settings, the two losses and their fit,
the needs' places after a re-ranking, and the ways of leaving tuning sets out.

A ``Query`` holds one query's candidates (the hybrid default's first ``MAX_DEPTH`` tools) as rows of
``FEATURES``, which ``search_ltr.Featurizer`` computes; an ``EvalSet`` is one tuning or held-out set of
them. A ``Setting`` is a loss × feature set × depth × penalty of the grid ``settings()``; ``fit`` fits
one on some sets (damped Newton, pulled towards the default's order), ``places`` and ``recall`` measure a
set after the re-ranking (the default's order with no model), ``leave_out`` and ``nested`` fit on some
sets and measure on the others, and ``won_lost`` counts the needs a model moves across the first five.
The experiment, its features and its losses are described in ``search_ltr``'s docstring; this module
neither ranks nor reads a catalog.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

FEATURES = ("rank", "lex_z", "cos_z", "whole_rank", "clause_rank", "server_rank", "server_size", "in_server", "name")
FEATURE_SETS = {
    "core": ("rank", "lex_z", "cos_z", "clause_rank"),
    "core+server": ("rank", "lex_z", "cos_z", "clause_rank", "server_rank", "server_size", "in_server"),
    "core+name": ("rank", "lex_z", "cos_z", "clause_rank", "name"),
    "all": FEATURES,
}
LOSSES = ("listwise", "pairwise")
DEPTHS = (10, 20, 30)
PENALTIES = (0.003, 0.03, 0.3, 3.0)
MAX_DEPTH = max(DEPTHS)


@dataclass
class Query:
    """One query's candidates (the default's first ``MAX_DEPTH`` tools, best first) and their features."""

    x: Any
    """(MAX_DEPTH, len(FEATURES)) features of the candidates."""
    needs: list[list[int]]
    """Per need, the candidates' positions that meet it."""
    default_place: list[int]
    """Per need, the default's place of its best tool (0-based; beyond the candidates when none is among them)."""
    other: Any
    """(MAX_DEPTH,) bool: the candidate meets none of the query's needs."""


@dataclass
class EvalSet:
    label: str
    queries: list[Query]

    @property
    def needs(self) -> int:
        return sum(len(q.needs) for q in self.queries)


@dataclass(frozen=True)
class Setting:
    loss: str
    features: str
    depth: int
    penalty: float

    @property
    def label(self) -> str:
        return f"{self.loss} {self.features} depth {self.depth} λ {self.penalty:g}"


@dataclass
class Model:
    setting: Setting
    columns: list[int]
    mean: Any
    scale: Any
    w: Any

    def scores(self, x: Any) -> Any:
        return ((x[:, self.columns] - self.mean) / self.scale) @ self.w


def examples(sets: Sequence[EvalSet], setting: Setting, columns: list[int]) -> tuple[Any, Any, Any, Any]:
    """(x (E, depth, F), rel (E, depth), other (E, depth), weight (E,)): one example per need with an
    acceptable tool among the first ``depth`` candidates; each set's examples weigh 1 / their number."""
    xs: list[Any] = []
    rels: list[Any] = []
    others: list[Any] = []
    weights: list[float] = []
    depth = setting.depth
    for s in sets:
        start = len(xs)
        for q in s.queries:
            if len(q.x) < depth:
                continue  # a catalog of fewer tools than the depth (none here) keeps the default's order
            for need in q.needs:
                rel = np.zeros(depth, dtype=bool)
                rel[[p for p in need if p < depth]] = True
                if rel.any():
                    xs.append(q.x[:depth, columns])
                    rels.append(rel)
                    others.append(q.other[:depth])
        count = len(xs) - start
        weights.extend([1.0 / max(1, count)] * count)
    w = np.asarray(weights)
    return np.stack(xs), np.stack(rels), np.stack(others), w / w.sum()


def _softmax_stats(s: Any, mask: Any, x: Any) -> tuple[Any, Any, Any]:
    """log Σ exp(s) over ``mask`` per example, the softmax-weighted mean of ``x`` and its weights."""
    z = np.where(mask, s, -np.inf)
    top = z.max(axis=1, keepdims=True)
    e = np.where(mask, np.exp(z - top), 0.0)
    total = e.sum(axis=1, keepdims=True)
    p = e / total
    return (np.log(total) + top)[:, 0], np.einsum("en,enf->ef", p, x), p


def listwise(w: Any, x: Any, rel: Any, other: Any, weight: Any) -> tuple[float, Any, Any]:
    """Loss, gradient and a positive-definite curvature (the softmax covariance over all) of the listwise loss."""
    s = x @ w
    lse_all, mean_all, p_all = _softmax_stats(s, rel | other, x)
    lse_rel, mean_rel, _ = _softmax_stats(s, rel, x)
    loss = float(weight @ (lse_all - lse_rel))
    grad = weight @ (mean_all - mean_rel)
    centred = x - mean_all[:, None, :]
    hess = np.einsum("e,en,enf,eng->fg", weight, p_all, centred, centred)
    return loss, grad, hess


def pairs(x: Any, rel: Any, other: Any, weight: Any) -> tuple[Any, Any]:
    """(differences x_acceptable − x_other, weight) of every pair; each need's pairs weigh the need's weight."""
    e, i, j = np.nonzero(rel[:, :, None] & other[:, None, :])
    count = np.bincount(e, minlength=len(x))
    return x[e, i] - x[e, j], weight[e] / np.maximum(count[e], 1)


def pairwise(w: Any, d: Any, pw: Any) -> tuple[float, Any, Any]:
    m = d @ w
    loss = float(pw @ np.logaddexp(0.0, -m))
    p = 1.0 / (1.0 + np.exp(np.clip(m, -60, 60)))  # sigmoid(−m)
    grad = -(pw * p) @ d
    hess = (d * (pw * p * (1 - p))[:, None]).T @ d
    return loss, grad, hess


def minimise(objective: Any, w0: Any, prior: Any, penalty: float) -> Any:
    """Damped Newton with backtracking on ``objective(w) + penalty · |w − prior|²``."""

    def total(w: Any) -> tuple[float, Any, Any]:
        loss, grad, hess = objective(w)
        diff = w - prior
        return loss + penalty * float(diff @ diff), grad + 2 * penalty * diff, hess + 2 * penalty * np.eye(len(w))

    w = w0.copy()
    value, grad, hess = total(w)
    for _ in range(100):
        step = np.linalg.solve(hess + 1e-9 * np.eye(len(w)), grad)
        t = 1.0
        while t > 1e-6:
            candidate = w - t * step
            new = total(candidate)
            if new[0] <= value - 1e-4 * t * float(grad @ step):
                break
            t /= 2
        else:
            break
        w, (value, grad, hess) = candidate, new
        if np.abs(t * step).max() < 1e-7:
            break
    return w


def fit(sets: Sequence[EvalSet], setting: Setting) -> Model:
    columns = [FEATURES.index(f) for f in FEATURE_SETS[setting.features]]
    x, rel, other, weight = examples(sets, setting, columns)
    valid = rel | other
    flat = x[valid]
    mean, scale = flat.mean(axis=0), flat.std(axis=0)
    scale[scale <= 0] = 1.0
    xs = (x - mean) / scale
    if setting.loss == "listwise":

        def objective(w: Any) -> tuple[float, Any, Any]:
            return listwise(w, xs, rel, other, weight)

    else:
        d, pw = pairs(xs, rel, other, weight)

        def objective(w: Any) -> tuple[float, Any, Any]:
            return pairwise(w, d, pw)

    # the default alone: the rank feature's weight, fitted without penalty; then the rest pulled towards it
    r = FEATURE_SETS[setting.features].index("rank")
    one = np.zeros(len(columns))
    one[r] = 1.0
    c = minimise(lambda a: _restricted(objective, a, one), np.zeros(1), np.zeros(1), 1e-6)
    prior = c[0] * one
    w = minimise(objective, prior, prior, setting.penalty)
    return Model(setting, columns, mean, scale, w)


def _restricted(objective: Any, a: Any, direction: Any) -> tuple[float, Any, Any]:
    loss, grad, hess = objective(a[0] * direction)
    return loss, np.array([grad @ direction]), np.array([[direction @ hess @ direction]])


def places(s: EvalSet, model: Model | None) -> list[int]:
    """Each need's place (0-based) after the re-ranking (the default's when ``model`` is None)."""
    out = []
    for q in s.queries:
        if model is None or len(q.x) < model.setting.depth:
            out.extend(q.default_place)
            continue
        depth = model.setting.depth
        scores = model.scores(q.x[:depth])
        order = np.lexsort((np.arange(depth), -scores))
        new = np.empty(depth, dtype=int)
        new[order] = np.arange(depth)
        for need, default in zip(q.needs, q.default_place, strict=True):
            inside = [int(new[p]) for p in need if p < depth]
            out.append(min(inside) if inside else default)
    return out


def recall(s: EvalSet, model: Model | None) -> dict[str, float]:
    p = np.asarray(places(s, model))
    return {"R@1": float((p < 1).mean()), "R@5": float((p < 5).mean()), "R@10": float((p < 10).mean()),
            "needs": len(p)}  # fmt: skip


def settings() -> list[Setting]:
    return [Setting(*s) for s in itertools.product(LOSSES, FEATURE_SETS, DEPTHS, PENALTIES)]


def leave_out(tuning: dict[str, EvalSet], setting: Setting, groups: Sequence[Sequence[str]]) -> dict[str, float]:
    """R@5 of each set, measured by the model fitted on the sets outside its group."""
    out = {}
    for group in groups:
        model = fit([s for label, s in tuning.items() if label not in group], setting)
        for label in group:
            out[label] = recall(tuning[label], model)["R@5"]
    return out


def nested(tuning: dict[str, EvalSet]) -> dict[str, tuple[str, float]]:
    """The whole procedure left out: for each set, the setting chosen by leave-one-set-out on the other four,
    fitted on those four, measured on it — (setting, R@5)."""
    out = {}
    for outer in tuning:
        inner = {label: s for label, s in tuning.items() if label != outer}
        scored = {
            s: float(np.mean(list(leave_out(inner, s, [[label] for label in inner]).values()))) for s in settings()
        }
        best = max(scored, key=lambda s: (scored[s], -s.depth, s.penalty))
        out[outer] = (best.label, recall(tuning[outer], fit(list(inner.values()), best))["R@5"])
    return out


def won_lost(s: EvalSet, model: Model) -> tuple[int, int]:
    """Needs the model brings into the first five, and needs it pushes out, against the default."""
    before, after = np.asarray(places(s, None)), np.asarray(places(s, model))
    return int(((after < 5) & (before >= 5)).sum()), int(((after >= 5) & (before < 5)).sum())
