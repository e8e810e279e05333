"""Judging in the embedded world: a ``Scene`` (what the inspector saw) into one verdict per
constraint.

The rules are steps 5–10 of ``evoharness.sim.inspector``'s docstring (position, proximity,
depth, text, quality, texture, shape and distinct instances); the rules shared with the real
verifiers live beside the tasks: GenEval's position rule (``evoharness.tasks.position``),
T2I-CompBench's proximity rule (``evoharness.tasks.proximity``) and the distinct-instance
matching (``evoharness.tasks.instances``), which the OWLv2 backend
(``services.verification.backends.owlv2``) applies to its own detections. This module reads
no pixels (perception is ``evoharness.sim.inspector``), so a perturbed scene
(``evoharness.sim.detector``) is judged by the same code. ``judge`` gives one constraint's
verdict, ``judge_all`` a list's (distinct instances, step 10).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.sim.scene import Detection, Scene
from evoharness.tasks.instances import match_instances
from evoharness.tasks.models import (
    DEPTH_RELATIONS,
    POSITION_RELATIONS,
    PROXIMITY_RELATIONS,
    Constraint,
    ConstraintType,
)
from evoharness.tasks.position import relative_position
from evoharness.tasks.proximity import proximity
from evoharness.vocab import SHAPES, TEXTURES, WORLD_CLASSES

_WORLD = frozenset(WORLD_CLASSES)
#: Constraint types about one object class (``subject``).
_OBJECT_TYPES = frozenset(
    {
        ConstraintType.object,
        ConstraintType.count,
        ConstraintType.negative,
        ConstraintType.color,
        ConstraintType.position,
    }
)

_AS_LETTER = str.maketrans({"0": "o", "1": "i"})
_AS_DIGIT = str.maketrans({"o": "0", "i": "1", "l": "1"})


def canonical_text(text: str) -> str:
    """Text as compared: case-folded; within a word that is mostly letters, ``0``/``1`` read as
    ``o``/``i`` and within a mostly-digit word ``o``/``i``/``l`` as digits (OCR's classic
    confusions, resolved by context); whitespace removed (OCR often drops or adds spaces)."""
    words = []
    for w in text.casefold().split():
        letters = sum(c.isalpha() for c in w)
        digits = sum(c.isdigit() for c in w)
        words.append(w.translate(_AS_LETTER if letters >= digits else _AS_DIGIT))
    return "".join(words)


def normalized_edit_distance(a: str, b: str) -> float:
    """Levenshtein distance / max(len) of the ``canonical_text`` forms (0..1)."""
    a, b = canonical_text(a), canonical_text(b)
    if not a and not b:
        return 0.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] / max(len(a), len(b))


def judge_all(constraints: Sequence[Constraint], scene: Scene) -> list[Evidence]:
    """One ``Evidence`` per constraint, in order: ``judge`` for each, except that
    constraints of one kind on one class (``_instance_kind``: object, colour, texture,
    shape), when there are several, are re-judged on distinct detections (step 10 of the
    module docstring)."""
    out = [judge(c, scene) for c in constraints]
    groups: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(constraints):
        kind = _instance_kind(c)
        if kind is None or c.subject not in _WORLD:
            continue
        if kind == "shape" and not scene.shapes_read:
            continue  # judge() says why (uncertain)
        groups.setdefault((c.subject, kind), []).append(i)
    for (subject, kind), idx in groups.items():
        if len(idx) < 2:
            continue
        dets = [d for d in scene.detections if d.cls == subject]
        judged = _judge_distinct(kind, [constraints[i] for i in idx], dets)
        for i, ev in zip(idx, judged, strict=True):
            out[i] = ev
    return out


def judge(c: Constraint, scene: Scene) -> Evidence:
    """The verdict on ``c`` from ``scene`` (the rules of the module docstring). A
    ``quality`` constraint needs a scene inspected with ``quality=True`` (else
    ``uncertain``)."""
    dets = [d for d in scene.detections if d.cls == c.subject]
    t = c.type
    ev: dict[str, Any] = {"constraint_id": c.constraint_id, "decided_by": "sim-inspector"}
    textured = t is ConstraintType.attribute and str(c.value) in TEXTURES
    shaped = t is ConstraintType.attribute and str(c.value) in SHAPES
    unknown = [
        name
        for name in (
            c.subject if t in _OBJECT_TYPES or textured or shaped else None,
            str(c.value) if t is ConstraintType.position else None,
        )
        if name is not None and name not in _WORLD
    ]
    if unknown:
        return Evidence(
            **ev,
            status=EvidenceStatus.uncertain,
            confidence=0.0,
            note=f"{unknown[0]!r} is not a class the simulator inspector can see",
        )
    boxes = [d.box for d in dets]
    conf = min((d.confidence for d in dets), default=0.9)
    if t is ConstraintType.object:
        ok = bool(dets)
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=conf if ok else 0.9,
            boxes=boxes,
            observed=len(dets),
            note=f"{len(dets)} {c.subject} detected",
        )
    if t is ConstraintType.count:
        n = len(dets)
        lo, hi = c.min_count or 0, c.max_count
        ok = n >= lo and (hi is None or n <= hi)
        want = f"{lo}..{hi if hi is not None else 'inf'}"
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=conf,
            boxes=boxes,
            observed=n,
            note=f"{n} {c.subject} detected, expected {want}",
        )
    if t is ConstraintType.negative:
        ok = not dets
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=0.9 if ok else conf,
            boxes=boxes,
            observed=len(dets),
            note=f"{len(dets)} {c.subject} detected, expected none",
        )
    if t is ConstraintType.color:
        k = max(1, c.min_count or 1)
        top = dets[:k]
        colors = [d.color for d in top]
        ok = len(top) >= k and colors.count(str(c.value)) >= k
        note = (
            f"no {c.subject} detected"
            if not top
            else f"{c.subject} colour(s) {colors}, expected {c.value}"
        )
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=conf if top else 0.9,
            boxes=[d.box for d in top],
            observed=colors,
            note=note,
        )
    if shaped and not scene.shapes_read:
        return Evidence(
            **ev,
            status=EvidenceStatus.uncertain,
            confidence=0.0,
            note="shapes were not read (inspect(..., shapes=True))",
        )
    if textured or shaped:
        k = max(1, c.min_count or 1)
        top = dets[:k]
        seen = [d.texture if textured else d.shape for d in top]
        if textured and top and None in seen:
            return Evidence(
                **ev,
                status=EvidenceStatus.uncertain,
                confidence=0.0,
                boxes=[d.box for d in top],
                observed=seen,
                note=f"{c.subject} is too small to read its texture",
            )
        ok = len(top) >= k and seen.count(str(c.value)) >= k
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=conf if top else 0.9,
            boxes=[d.box for d in top],
            observed=seen,
            note=f"no {c.subject} detected"
            if not top
            else f"{c.subject} {'texture' if textured else 'shape'}(s) {seen}, expected {c.value}",
        )
    if t is ConstraintType.position and c.subject == c.value:
        return Evidence(
            **ev,
            status=EvidenceStatus.uncertain,
            confidence=0.0,
            note=f"a relation between two {c.subject} objects: which {c.subject} is which "
            "cannot be told from the image",
        )
    if t is ConstraintType.position and c.relation in DEPTH_RELATIONS:
        return _judge_depth(c, dets, scene, ev, conf)
    if t is ConstraintType.position and c.relation in PROXIMITY_RELATIONS:
        return _judge_proximity(c, dets, scene, ev, conf)
    if t is ConstraintType.position and c.relation not in POSITION_RELATIONS:
        return Evidence(
            **ev,
            status=EvidenceStatus.uncertain,
            confidence=0.0,
            note=f"relation {c.relation!r} is not checked by this inspector",
        )
    if t is ConstraintType.position:
        operands = _relation_operands(c, dets, scene, ev)
        if isinstance(operands, Evidence):
            return operands
        top, targets = operands[0], operands[1][:1]
        rels = [relative_position(a.box, targets[0].box) for a in top]
        ok = all(c.relation in r for r in rels)
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=min(conf, targets[0].confidence),
            boxes=[d.box for d in top + targets],
            observed=[sorted(r) for r in rels],
            note=f"{c.subject} is {sorted(rels[0]) or 'near'} {c.value}, expected {c.relation}",
        )
    if t is ConstraintType.text:
        want = str(c.value)
        best, best_box, best_d = "", None, 1.0
        for text, box in scene.signs:
            d = normalized_edit_distance(text, want)
            if d < best_d or best_box is None:
                best, best_box, best_d = text, box, d
        ok = best_d == 0.0 and best_box is not None
        return Evidence(
            constraint_id=c.constraint_id,
            decided_by="sim-ocr",
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=float(max(0.05, 1.0 - best_d)) if best_box is not None else 0.9,
            boxes=[best_box] if best_box is not None else [],
            observed=best,
            note=f"read {best!r}, expected {want!r}, normalised edit distance {best_d:.2f}",
        )
    if t is ConstraintType.quality:
        q = scene.quality
        if q is None:
            return Evidence(
                **ev,
                status=EvidenceStatus.uncertain,
                confidence=0.0,
                note="image quality was not measured (inspect(..., quality=True))",
            )
        threshold = float(c.value or 0.0)
        ok = q.score >= threshold
        return Evidence(
            **ev,
            status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
            confidence=min(max(0.5 + abs(q.score - threshold), 0.5), 1.0),
            observed=q.as_observed(),
            note=(
                f"quality {q.score:.2f} (noise {q.noise:.2f}, clipping {q.clipping:.2f}, "
                f"seams {q.seams:.2f}), threshold {threshold:.2f}"
            ),
        )
    return Evidence(
        **ev,
        status=EvidenceStatus.uncertain,
        confidence=0.0,
        note=f"the simulator inspector cannot judge {t.value} constraints",
    )


def _instance_kind(c: Constraint) -> str | None:
    """Which property of a detection ``c`` asks for, when several such constraints on one class
    need distinct instances: ``"object"``, ``"color"``, ``"texture"``, ``"shape"``; else None."""
    if c.type is ConstraintType.object:
        return "object"
    if c.type is ConstraintType.color:
        return "color"
    if c.type is ConstraintType.attribute and str(c.value) in TEXTURES:
        return "texture"
    if c.type is ConstraintType.attribute and str(c.value) in SHAPES:
        return "shape"
    return None


def _judge_distinct(
    kind: str, cs: Sequence[Constraint], dets: Sequence[Detection]
) -> list[Evidence]:
    """Verdicts on ``cs`` (all of ``kind``, ``_instance_kind``, on one class) from that class's
    detections ``dets`` (scene order, best first), each constraint on its own instances
    (``match_instances``). Unmatched: ``failed`` (``uncertain`` for a texture when a free
    instance's texture could not be read)."""

    def value(d: Detection) -> str | None:
        return {"object": d.cls, "color": d.color, "texture": d.texture, "shape": d.shape}[kind]

    seen = [value(d) for d in dets]
    demands = [max(1, c.min_count or 1) if kind != "object" else 1 for c in cs]
    fits = [[kind == "object" or v == str(c.value) for v in seen] for c in cs]
    got = match_instances(demands, fits)
    user = {j: cs[i].constraint_id for i, js in enumerate(got) for j in js or ()}
    word = {"object": "", "color": "colour", "texture": "texture", "shape": "shape"}[kind]
    out = []
    for c, js, k, fit in zip(cs, got, demands, fits, strict=True):
        ev: dict[str, Any] = {"constraint_id": c.constraint_id, "decided_by": "sim-inspector"}
        observed: Any = len(dets) if kind == "object" else seen
        if js is not None:
            used = ", ".join(
                f"{c.subject} {j + 1} of {len(dets)}" + (f" ({seen[j]})" if word else "")
                for j in js
            )
            out.append(
                Evidence(
                    **ev,
                    status=EvidenceStatus.passed,
                    confidence=min(dets[j].confidence for j in js),
                    boxes=[dets[j].box for j in js],
                    observed=observed,
                    note=f"{len(dets)} {c.subject} detected; {len(cs)} {kind} constraints on "
                    f"{c.subject} take distinct ones: {used}",
                )
            )
            continue
        want = f"{k} " if k > 1 else ""
        what = f"{c.subject}" if kind == "object" else f"{c.subject} with {word} {c.value}"
        taken = sorted({user[j] for j, f in enumerate(fit) if f and j in user})
        why = (
            f"{len(dets)} {c.subject} detected"
            + (f" ({word}s {seen})" if word else "")
            + f"; no {want}free {what}"
            + (f" (taken by {', '.join(taken)})" if taken else "")
        )
        unread = kind == "texture" and any(v is None for j, v in enumerate(seen) if j not in user)
        out.append(
            Evidence(
                **ev,
                status=EvidenceStatus.uncertain if unread else EvidenceStatus.failed,
                confidence=0.0 if unread else 0.9,
                boxes=[d.box for d in dets],
                observed=observed,
                note=why + ("; a free one is too small to read its texture" if unread else ""),
            )
        )
    return out


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes (0 when they do not meet)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _relation_operands(
    c: Constraint, dets: list[Detection], scene: Scene, ev: dict[str, Any]
) -> tuple[list[Detection], list[Detection]] | Evidence:
    """The operands of a ``position`` constraint: the ``k`` most confident ``subject``
    detections (k = ``min_count`` or 1) and every ``value`` detection, most confident first;
    or a failed ``Evidence`` naming the object not detected."""
    k = max(1, c.min_count or 1)
    top = dets[:k]
    targets = [d for d in scene.detections if d.cls == c.value]
    if len(top) < k or not targets:
        missing = c.subject if len(top) < k else c.value
        return Evidence(
            **ev,
            status=EvidenceStatus.failed,
            confidence=0.9,
            boxes=[d.box for d in top + targets[:1]],
            observed=None,
            note=f"no {missing} detected",
        )
    return top, targets


def _judge_depth(
    c: Constraint, dets: list[Detection], scene: Scene, ev: dict[str, Any], conf: float
) -> Evidence:
    """ "``subject`` behind / in front of ``value``" by occlusion order (module doc, 5b):
    each of the ``k`` most confident subject detections (k = ``min_count`` or 1) must be
    occluded by (behind) or occlude (in front of) a ``value`` detection. ``observed`` lists,
    per subject detection, the order seen against the nearest such target ("behind",
    "in front of", or None: no occlusion between them) and T2I-CompBench's soft score
    (1 when the order is right and IoU > 0.5, IoU / 0.5 when 0 < IoU <= 0.5, else 0)."""
    operands = _relation_operands(c, dets, scene, ev)
    if isinstance(operands, Evidence):
        return operands
    top, targets = operands
    seen: list[dict[str, Any]] = []
    used: list[Detection] = []
    for a in top:

        def order(b: Detection, a: Detection = a) -> str | None:
            if b.ident in a.occluders:
                return "behind"
            if a.ident in b.occluders:
                return "in front of"
            return None

        # the target it is in an occlusion with, else the one its box overlaps most
        b = max(targets, key=lambda b: (order(b) is not None, box_iou(a.box, b.box)))
        rel, iou = order(b), box_iou(a.box, b.box)
        soft = 0.0 if rel != c.relation else (1.0 if iou > 0.5 else iou / 0.5)
        seen.append(
            {
                "order": rel,
                "iou": round(float(iou), 3),
                "t2i_compbench_score": round(float(soft), 3),
            }
        )
        used.append(b)
    ok = all(s["order"] == c.relation for s in seen)
    first = seen[0]["order"]
    return Evidence(
        **ev,
        status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
        confidence=min([conf] + [b.confidence for b in used]),
        boxes=[d.box for d in top + used],
        observed=seen,
        note=f"{c.subject} is {first or 'not overlapping'} {c.value}, expected {c.relation}"
        if first
        else f"{c.subject} and {c.value} do not occlude each other, expected {c.relation}",
    )


def _judge_proximity(
    c: Constraint, dets: list[Detection], scene: Scene, ev: dict[str, Any], conf: float
) -> Evidence:
    """A ``next to`` / ``near`` constraint by T2I-CompBench's rule (module docstring, 5;
    ``evoharness.tasks.proximity``): the ``k`` most confident ``subject`` boxes must each be
    close to the most confident ``value`` box. ``observed``: per subject box its centre
    distances ``dx``, ``dy`` (fractions of the image side) and the threshold."""
    operands = _relation_operands(c, dets, scene, ev)
    if isinstance(operands, Evidence):
        return operands
    top, targets = operands[0], operands[1][:1]
    prox = [proximity(a.box, targets[0].box) for a in top]
    ok = all(p.holds for p in prox)
    worst = next((p for p in prox if not p.holds), prox[0])
    return Evidence(
        **ev,
        status=EvidenceStatus.passed if ok else EvidenceStatus.failed,
        confidence=min(conf, targets[0].confidence),
        boxes=[d.box for d in top + targets],
        observed=[
            {
                "dx": round(p.dx, 4),
                "dy": round(p.dy, 4),
                "threshold": round(p.threshold, 4),
            }
            for p in prox
        ],
        note=f"{c.subject} {c.relation} {c.value}: {worst.describe()}",
    )
