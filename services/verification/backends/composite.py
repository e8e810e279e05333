"""``composite``: capability-partitioned routing over several verifier backends.

Each constraint type is routed to the backends that own it (``routes``, configurable; default:
the detector for presence/absence/count/position, OCR for text, the VLM for colours,
attributes and free questions). Per constraint:

1. every routed backend judges it (constraints are batched per backend, one call each);
2. a backend *votes* when its verdict is pass/fail with confidence >= ``min_confidence`` (per
   type in ``min_confidence_by_type``); otherwise it abstains (uncertain or low confidence);
3. ``require: all`` (default): every routed backend must vote, and all the same way;
   ``require: any``: at least one votes and no two votes disagree;
4. if that fails only because backends abstained and a ``fallbacks`` backend is configured
   for the type, the fallback judges it and must vote by itself;
5. otherwise the verdict is ``uncertain`` — disagreement or low confidence never becomes a
   guess.

The merged confidence is the lowest voter's; ``decided_by`` is ``composite/<voters joined by
+>`` (or ``composite`` when undecided); ``note`` names the route and every backend's verdict;
``observed`` maps backend → its observation; ``boxes`` are the voters' boxes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.models import Constraint, ConstraintType
from services.verification.backends.base import VerifierBackend, evidence

DEFAULT_ROUTES: dict[str, list[str]] = {
    "object": ["owlv2"],
    "count": ["owlv2"],
    "position": ["owlv2"],
    "negative": ["owlv2"],
    "text": ["ocr"],
    "color": ["vlm"],
    "attribute": ["vlm"],
    "vqa": ["vlm"],
}
DEFAULT_FALLBACKS: dict[str, str] = {
    "object": "vlm",
    "count": "vlm",
    "position": "vlm",
    "negative": "vlm",
    "text": "vlm",
}


class CompositeSettings(BaseModel):
    """Routing and merge settings (module docstring). Keys of ``routes``,
    ``fallbacks`` and ``min_confidence_by_type`` are constraint types."""

    model_config = ConfigDict(extra="forbid")

    routes: dict[ConstraintType, list[str]] = Field(
        default_factory=lambda: {ConstraintType(k): list(v) for k, v in DEFAULT_ROUTES.items()}
    )
    fallbacks: dict[ConstraintType, str] = Field(
        default_factory=lambda: {ConstraintType(k): v for k, v in DEFAULT_FALLBACKS.items()}
    )
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    min_confidence_by_type: dict[ConstraintType, float] = Field(default_factory=dict)
    require: Literal["all", "any"] = "all"

    def backend_names(self) -> set[str]:
        """Every backend a route or fallback names."""
        return {n for v in self.routes.values() for n in v} | set(self.fallbacks.values())


def _fmt(e: Evidence, name: str) -> str:
    return f"{name} {e.status.value} ({e.confidence:.2f}: {e.note[:160]})"


class CompositeBackend:
    """``VerifierBackend`` routing constraint types to ``backends`` (name → backend)."""

    name = "composite"

    def __init__(
        self, settings: CompositeSettings, backends: Mapping[str, VerifierBackend]
    ) -> None:
        missing = sorted(settings.backend_names() - set(backends))
        if missing:
            raise ValueError(f"composite routes name backends that are not configured: {missing}")
        self.settings = settings
        self.backends = dict(backends)
        self.capabilities = frozenset(t.value for t in settings.routes)

    def _min_conf(self, t: ConstraintType) -> float:
        return self.settings.min_confidence_by_type.get(t, self.settings.min_confidence)

    def _votes(self, e: Evidence, t: ConstraintType) -> bool:
        return e.status is not EvidenceStatus.uncertain and e.confidence >= self._min_conf(t)

    def _run(
        self, png: bytes, plan: Mapping[str, list[Constraint]], prompt: str
    ) -> dict[tuple[str, str], Evidence]:
        out: dict[tuple[str, str], Evidence] = {}
        for name, cs in plan.items():
            if not cs:
                continue
            for c, e in zip(cs, self.backends[name].verify(png, cs, prompt), strict=True):
                out[(name, c.constraint_id)] = e
        return out

    def merge(
        self, c: Constraint, results: Sequence[tuple[str, Evidence]]
    ) -> tuple[Evidence | None, str]:
        """The decided evidence for ``c`` from ``(backend, evidence)`` pairs, or ``(None,
        why)`` when undecided. Pure; the module docstring gives the rule."""
        t = c.type
        votes = [(n, e) for n, e in results if self._votes(e, t)]
        abstain = [(n, e) for n, e in results if not self._votes(e, t)]
        statuses = {e.status for _, e in votes}
        if len(statuses) > 1:
            return None, "disagreement: " + "; ".join(_fmt(e, n) for n, e in results)
        if not votes:
            return None, "no backend was confident: " + "; ".join(_fmt(e, n) for n, e in results)
        if self.settings.require == "all" and abstain:
            return None, "not every routed backend was confident: " + "; ".join(
                _fmt(e, n) for n, e in results
            )
        status = statuses.pop()
        conf = min(e.confidence for _, e in votes)
        names = [n for n, _ in votes]
        boxes = [b for _, e in votes for b in e.boxes]
        note = "; ".join(_fmt(e, n) for n, e in results)
        return (
            evidence(
                c,
                status,
                conf,
                "composite/" + "+".join(names),
                note,
                {n: e.observed for n, e in results},
                boxes,
            ),
            note,
        )

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """One evidence per constraint (module docstring)."""
        plan: dict[str, list[Constraint]] = {}
        for c in constraints:
            for name in self.settings.routes.get(c.type, []):
                plan.setdefault(name, []).append(c)
        first = self._run(png, plan, prompt)
        decided: dict[str, Evidence] = {}
        why: dict[str, str] = {}
        retry: dict[str, list[Constraint]] = {}
        for c in constraints:
            route = self.settings.routes.get(c.type, [])
            if not route:
                why[c.constraint_id] = f"no backend is routed for {c.type.value} constraints"
                continue
            results = [(n, first[(n, c.constraint_id)]) for n in route]
            ev, reason = self.merge(c, results)
            if ev is not None:
                decided[c.constraint_id] = ev.model_copy(
                    update={"note": f"routed {c.type.value} → {'+'.join(route)}: {ev.note}"}
                )
                continue
            why[c.constraint_id] = f"routed {c.type.value} → {'+'.join(route)}: {reason}"
            fb = self.settings.fallbacks.get(c.type)
            disagreement = reason.startswith("disagreement")
            if fb and fb not in route and not disagreement:
                retry.setdefault(fb, []).append(c)
        second = self._run(png, retry, prompt)
        out: list[Evidence] = []
        for c in constraints:
            if c.constraint_id in decided:
                out.append(decided[c.constraint_id])
                continue
            fb = self.settings.fallbacks.get(c.type)
            if fb and (fb, c.constraint_id) in second:
                ev, reason = self.merge(c, [(fb, second[(fb, c.constraint_id)])])
                if ev is not None:
                    out.append(
                        ev.model_copy(
                            update={"note": f"{why[c.constraint_id]}; fallback {fb}: {ev.note}"}
                        )
                    )
                    continue
                why[c.constraint_id] += f"; fallback {fb}: {reason}"
            out.append(
                evidence(c, EvidenceStatus.uncertain, 0.0, "composite", why[c.constraint_id])
            )
        return out
