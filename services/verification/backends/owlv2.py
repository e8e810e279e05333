"""``owlv2``: an open-vocabulary detector (OWLv2, Minderer et al. 2023, through
``transformers``) for presence, absence, counts and 2-D position.

Weights come from ``model_path`` (a ``save_pretrained`` folder with the processor) or
``s3_prefix`` (that folder uploaded under a key prefix of the artifact bucket, downloaded once
into ``cache_dir``); never from a model hub.

Detection: one text query per distinct object name (``query_template``, default
``"a photo of a {label}"``, the OWL-ViT prompt convention); every predicted box is assigned
its best-scoring query (``post_process_grounded_object_detection``); boxes of one label are
de-duplicated with non-maximum suppression (IoU ``nms_iou``). Boxes are normalised to the
image (OWLv2 pads images to a square at the bottom/right, so pixel boxes are divided by the
original width and height).

Judgement (pure, ``judge``), with score bands from ``ScoreThresholds``:

- ``object``: best score present → pass (confidence = score); absent → fail (1 − score);
  else uncertain. ``negative`` is the mirror image. Several ``object`` constraints on one
  label ("a car and a car") take distinct boxes (``distinct_objects``, the matching of
  ``evoharness.tasks.instances`` that the simulator's inspector uses): the k-th is judged on
  the k-th best box, and fails when there is none left.
- ``count``: judged with ``counting_thresholds`` (GenEval's COUNTING_THRESHOLD 0.9 for its
  ``counting`` tag, against THRESHOLD 0.3 elsewhere; geneval/evaluation/evaluate_images.py), so
  "two cats" scored 0.95, 0.93, 0.5 counts two. ``lo`` = boxes scored present, ``hi`` = lo + boxes in the unsure band; pass when
  ``min_count <= lo`` and ``hi <= max_count``; fail when ``lo > max_count`` or
  ``hi < min_count``; else uncertain. Confidence: the lowest score among the counted boxes
  (pass), the first surplus box's score (too many), 1 − the best uncounted score (too few).
  Every record's ``observed`` names the detector (``detector``) and the thresholds applied.
- ``position``: the best box of each object; either absent → fail; either unsure →
  uncertain; else GenEval's rule (``evoharness.tasks.position``, shared with the inspector): centre offset
  shrunk by ``position_margin`` × (sum of box sizes) per axis, direction words for normalised
  components beyond 0.5; no direction left (heavy overlap) → uncertain. ``next to`` /
  ``near``: T2I-CompBench's proximity rule on the two best boxes (``evoharness.tasks.proximity``:
  centres closer than 0.313 of the side across or down), pass or fail; ``observed`` has the
  distances and the threshold. Depth
  (``behind`` / ``in front of``): either object absent → fail, else uncertain — boxes do not
  show depth (T2I-CompBench's 3D-spatial rule needs a depth map) and no depth model is
  configured.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.instances import match_instances
from evoharness.tasks.models import (
    DEPTH_RELATIONS,
    PROXIMITY_RELATIONS,
    Constraint,
    ConstraintType,
)
from evoharness.tasks.position import POSITION_THRESHOLD, relative_position
from evoharness.tasks.proximity import proximity
from services.verification.backends.base import ScoreThresholds, cannot_judge, evidence

Box = tuple[float, float, float, float]


class Owlv2Settings(BaseModel):
    """Where the weights are and how detections are judged (module docstring).

    ``thresholds``: score bands of presence, absence and position (GenEval's THRESHOLD 0.3).
    ``counting_thresholds``: the bands of ``count`` constraints (GenEval's COUNTING_THRESHOLD
    0.9, decisive: no unsure band). ``position_margin``: GenEval's POSITION_THRESHOLD (0.1). ``nms_iou``: boxes of one label
    overlapping more than this are one object. ``max_queries``: distinct labels per image
    (more are judged ``uncertain``). ``device``: torch device.
    """

    model_config = ConfigDict(extra="forbid")

    model_path: str = ""
    s3_prefix: str = ""
    cache_dir: str = ""
    device: str = "cpu"
    query_template: str = "a photo of a {label}"
    thresholds: ScoreThresholds = Field(default_factory=ScoreThresholds)
    counting_thresholds: ScoreThresholds = Field(
        default_factory=lambda: ScoreThresholds(pass_score=0.9, reject_score=0.9)
    )
    nms_iou: float = Field(default=0.5, gt=0.0, le=1.0)
    position_margin: float = Field(default=POSITION_THRESHOLD, ge=0.0, le=0.5)
    max_queries: int = Field(default=16, ge=1)


@dataclass(frozen=True)
class Detection:
    """One detected box: ``score`` 0..1, ``box`` normalised ``[x0, y0, x1, y1]``."""

    score: float
    box: Box


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes (0 when disjoint or degenerate)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def nms(dets: Sequence[Detection], iou_threshold: float) -> list[Detection]:
    """Greedy non-maximum suppression, highest score first."""
    kept: list[Detection] = []
    for d in sorted(dets, key=lambda d: -d.score):
        if all(iou(d.box, k.box) <= iou_threshold for k in kept):
            kept.append(d)
    return kept


def distinct_objects(
    constraints: Sequence[Constraint], dets: dict[str, list[Detection]]
) -> dict[int, dict[str, list[Detection]]]:
    """For each ``object`` constraint (by index) of a label that two or more ``object``
    constraints name: the detections it may use — its own box (best score first, assigned
    by ``match_instances``) or none when the others took every box. Constraints not listed
    are judged on all of ``dets``."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(constraints):
        if c.type is ConstraintType.object:
            groups.setdefault(c.subject, []).append(i)
    out: dict[int, dict[str, list[Detection]]] = {}
    for label, idx in groups.items():
        if len(idx) < 2:
            continue
        ds = sorted(dets.get(label, []), key=lambda d: -d.score)
        got = match_instances([1] * len(idx), [[True] * len(ds)] * len(idx))
        for i, js in zip(idx, got, strict=True):
            out[i] = {**dets, label: [ds[j] for j in js or ()]}
    return out


def judge(
    c: Constraint,
    dets: dict[str, list[Detection]],
    th: ScoreThresholds,
    margin: float = 0.1,
    name: str = "owlv2",
    count_th: ScoreThresholds | None = None,
) -> Evidence:
    """The verdict on ``c`` from ``dets`` (label → NMS'd detections, any order). Pure.

    ``th``: the score bands of every judgement but counts; ``count_th``: those of ``count``
    constraints (default ``th``; the backend passes GenEval's 0.9, see module docstring)."""
    t = c.type

    def best(label: str) -> Detection | None:
        ds = dets.get(label, [])
        return max(ds, key=lambda d: d.score) if ds else None

    if t in (ConstraintType.object, ConstraintType.negative):
        b = best(c.subject)
        s = b.score if b else 0.0
        band = th.band(s)
        boxes = [b.box] if b and band != "absent" else []
        obs: dict[str, Any] = {"best_score": round(s, 4)}
        if band == "unsure":
            return evidence(
                c,
                EvidenceStatus.uncertain,
                s,
                name,
                f"{c.subject}: best score {s:.2f} is in the unsure band",
                obs,
                boxes,
            )
        present = band == "present"
        ok = present if t is ConstraintType.object else not present
        conf = s if present else 1.0 - s
        word = "present" if present else "absent"
        return evidence(
            c,
            EvidenceStatus.passed if ok else EvidenceStatus.failed,
            conf,
            name,
            f"{c.subject} {word} (best score {s:.2f})",
            obs,
            boxes,
        )
    if t is ConstraintType.count:
        th = count_th or th
        ds = sorted(dets.get(c.subject, []), key=lambda d: -d.score)
        sure = [d for d in ds if th.band(d.score) == "present"]
        unsure = [d for d in ds if th.band(d.score) == "unsure"]
        lo, hi = len(sure), len(sure) + len(unsure)
        mn = c.min_count or 0
        mx = c.max_count
        obs = {"count": lo, "count_max": hi}
        boxes = [d.box for d in sure]
        want = f"{mn}" if mx == mn else f"{mn}..{'' if mx is None else mx}"
        if lo >= mn and (mx is None or hi <= mx):
            conf = (
                min((d.score for d in sure), default=1.0)
                if sure
                else 1.0 - (ds[0].score if ds else 0.0)
            )
            return evidence(
                c,
                EvidenceStatus.passed,
                conf,
                name,
                f"counted {lo} {c.subject} (want {want})",
                obs,
                boxes,
            )
        if mx is not None and lo > mx:
            return evidence(
                c,
                EvidenceStatus.failed,
                sure[mx].score,
                name,
                f"counted {lo} {c.subject}, more than {mx}",
                obs,
                boxes,
            )
        if hi < mn:
            rest = [d.score for d in ds if th.band(d.score) == "absent"]
            return evidence(
                c,
                EvidenceStatus.failed,
                1.0 - max(rest, default=0.0),
                name,
                f"counted at most {hi} {c.subject}, fewer than {mn}",
                obs,
                boxes,
            )
        return evidence(
            c,
            EvidenceStatus.uncertain,
            lo / max(hi, 1),
            name,
            f"{c.subject}: between {lo} and {hi} (want {want}); {len(unsure)} boxes in the unsure band",
            obs,
            boxes,
        )
    if t is ConstraintType.position:
        other = str(c.value)
        a, b = best(c.subject), best(other)
        sa, sb = (a.score if a else 0.0), (b.score if b else 0.0)
        obs = {"scores": [round(sa, 4), round(sb, 4)]}
        if th.band(sa) == "absent" or th.band(sb) == "absent":
            missing = [n for n, s in ((c.subject, sa), (other, sb)) if th.band(s) == "absent"]
            return evidence(
                c,
                EvidenceStatus.failed,
                1.0 - max(sa if c.subject in missing else 0, sb if other in missing else 0),
                name,
                f"cannot place: {', '.join(missing)} absent",
                obs,
            )
        if c.relation in DEPTH_RELATIONS:
            # T2I-CompBench compares a depth map's mean over the two boxes
            # (UniDet_eval/3D_spatial_eval.py); boxes alone carry no depth
            return evidence(
                c,
                EvidenceStatus.uncertain,
                0.0,
                name,
                f"{c.relation!r} needs depth: boxes alone do not show it and no depth model "
                "is configured",
                obs,
            )
        if a is None or b is None or th.band(sa) == "unsure" or th.band(sb) == "unsure":
            return evidence(
                c,
                EvidenceStatus.uncertain,
                min(sa, sb),
                name,
                "an object of the relation is only weakly detected",
                obs,
            )
        if c.relation in PROXIMITY_RELATIONS:
            near = proximity(a.box, b.box)
            obs.update(
                dx=round(near.dx, 4), dy=round(near.dy, 4), threshold=round(near.threshold, 4)
            )
            return evidence(
                c,
                EvidenceStatus.passed if near.holds else EvidenceStatus.failed,
                min(sa, sb),
                name,
                f"{c.subject} {c.relation} {other}: {near.describe()}",
                obs,
                [a.box, b.box],
            )
        rel = relative_position(a.box, b.box, margin)
        obs["relations"] = sorted(rel)
        if not rel:
            return evidence(
                c,
                EvidenceStatus.uncertain,
                min(sa, sb),
                name,
                f"{c.subject} and {other} overlap too much to tell",
                obs,
                [a.box, b.box],
            )
        ok = c.relation in rel
        return evidence(
            c,
            EvidenceStatus.passed if ok else EvidenceStatus.failed,
            min(sa, sb),
            name,
            f"{c.subject} is {' and '.join(sorted(rel))} {other} (want {c.relation})",
            obs,
            [a.box, b.box],
        )
    return cannot_judge(c, name)


def _labels(c: Constraint) -> list[str]:
    if c.type is ConstraintType.position:
        return [c.subject, str(c.value)]
    if c.type in (ConstraintType.object, ConstraintType.negative, ConstraintType.count):
        return [c.subject]
    return []


class Owlv2Backend:
    """``VerifierBackend`` over ``Owlv2ForObjectDetection`` (loaded lazily, once; inference
    serialised with a lock). ``store``: an ``S3ArtifactStore`` for ``s3_prefix`` weights."""

    name = "owlv2"
    capabilities = frozenset(
        {
            ConstraintType.object.value,
            ConstraintType.count.value,
            ConstraintType.position.value,
            ConstraintType.negative.value,
        }
    )

    def __init__(self, settings: Owlv2Settings, store: Any = None) -> None:
        if not settings.model_path and not settings.s3_prefix:
            raise ValueError(
                "owlv2.model_path or owlv2.s3_prefix must be set (weights are never fetched from a hub)"
            )
        self.settings = settings
        self.store = store
        self._lock = threading.Lock()
        self._model: Any = None
        self._processor: Any = None

    def _weights_dir(self) -> Path:
        s = self.settings
        if s.model_path:
            p = Path(s.model_path)
            if not (p / "config.json").is_file():
                raise FileNotFoundError(f"owlv2.model_path {p} has no config.json")
            return p
        if self.store is None:
            raise ValueError("owlv2.s3_prefix is set but the service has no artifact store")
        import tempfile

        prefix = s.s3_prefix.strip("/") + "/"
        cache = (
            Path(s.cache_dir or tempfile.gettempdir())
            / "evoharness-owlv2"
            / prefix.strip("/").replace("/", "_")
        )
        if (cache / ".complete").is_file():
            return cache
        keys = self.store.list_keys(prefix)
        if not any(k.endswith("config.json") for k in keys):
            raise FileNotFoundError(
                f"s3://{self.store.bucket}/{prefix}: no config.json under the prefix"
            )
        tmp = Path(
            tempfile.mkdtemp(prefix=".owlv2-", dir=cache.parent if cache.parent.exists() else None)
        )
        for k in keys:
            dest = tmp / k[len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(self.store.get(k))
        (tmp / ".complete").write_text("ok")
        cache.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(cache)
        except OSError:  # another process won the race; use theirs
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        return cache

    def load(self) -> None:
        """Load processor and model (idempotent)."""
        with self._lock:
            if self._model is not None:
                return
            from transformers import Owlv2ForObjectDetection, Owlv2Processor

            d = self._weights_dir()
            self._processor = Owlv2Processor.from_pretrained(str(d))
            model: Any = Owlv2ForObjectDetection.from_pretrained(str(d))
            self._model = model.to(self.settings.device).eval()

    def detect(self, png: bytes, labels: Sequence[str]) -> dict[str, list[Detection]]:
        """Detections per label (NMS'd, normalised boxes, scores above ``reject_score / 2``)."""
        import torch
        from PIL import Image

        self.load()
        with Image.open(io.BytesIO(png)) as im:
            image = im.convert("RGB")
        w, h = image.size
        side = max(w, h)
        queries = [self.settings.query_template.format(label=lab) for lab in labels]
        with self._lock:
            inputs = self._processor(
                text=[queries], images=image, return_tensors="pt", padding=True, truncation=True
            )
            inputs = {k: v.to(self.settings.device) for k, v in inputs.items()}
            with torch.no_grad():
                outputs = self._model(**inputs)
            res = self._processor.post_process_grounded_object_detection(
                outputs,
                threshold=self.settings.thresholds.reject_score / 2,
                target_sizes=[(side, side)],
            )[0]
        out: dict[str, list[Detection]] = {lab: [] for lab in labels}
        for score, label, box in zip(
            res["scores"].tolist(), res["labels"].tolist(), res["boxes"].tolist(), strict=True
        ):
            x0, y0, x1, y1 = box
            nb = (max(0.0, x0 / w), max(0.0, y0 / h), min(1.0, x1 / w), min(1.0, y1 / h))
            if nb[2] <= nb[0] or nb[3] <= nb[1]:
                continue
            out[labels[int(label)]].append(Detection(float(score), nb))
        return {lab: nms(ds, self.settings.nms_iou) for lab, ds in out.items()}

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """Evidence per constraint (``uncertain`` outside the capabilities or past
        ``max_queries`` labels)."""
        labels: list[str] = []
        for c in constraints:
            for lab in _labels(c):
                if lab not in labels:
                    labels.append(lab)
        judged = labels[: self.settings.max_queries]
        dets = self.detect(png, judged) if judged else {}
        own = distinct_objects(constraints, dets)
        out = []
        for i, c in enumerate(constraints):
            if c.type.value not in self.capabilities:
                out.append(cannot_judge(c, self.name))
            elif any(lab not in dets for lab in _labels(c)):
                out.append(
                    evidence(
                        c,
                        EvidenceStatus.uncertain,
                        0.0,
                        self.name,
                        f"more than {self.settings.max_queries} labels in one image",
                    )
                )
            elif i in own and not own[i][c.subject]:
                n = len(dets.get(c.subject, []))
                out.append(
                    self._record(
                        c,
                        evidence(
                            c,
                            EvidenceStatus.failed,
                            1.0,
                            self.name,
                            f"{c.subject}: {n} box(es), each taken by another object "
                            f"constraint on {c.subject}",
                            {"best_score": 0.0},
                        ),
                    )
                )
            else:
                out.append(self._record(c, self._judge(c, own.get(i, dets))))
        return out

    @property
    def detector_id(self) -> str:
        """Which weights judged: ``owlv2:<model_path>`` or ``owlv2:s3://<bucket>/<prefix>``."""
        s = self.settings
        if s.model_path:
            return f"owlv2:{s.model_path}"
        bucket = getattr(self.store, "bucket", "?")
        return f"owlv2:s3://{bucket}/{s.s3_prefix.strip('/')}"

    def _judge(self, c: Constraint, dets: dict[str, list[Detection]]) -> Evidence:
        s = self.settings
        return judge(
            c, dets, s.thresholds, s.position_margin, self.name, count_th=s.counting_thresholds
        )

    def _record(self, c: Constraint, e: Evidence) -> Evidence:
        """``e`` with the detector id and the thresholds it was judged with in ``observed``."""
        th = (
            self.settings.counting_thresholds
            if c.type is ConstraintType.count
            else self.settings.thresholds
        )
        observed = dict(e.observed) if isinstance(e.observed, dict) else {"value": e.observed}
        observed["detector"] = self.detector_id
        observed["thresholds"] = {"pass_score": th.pass_score, "reject_score": th.reject_score}
        if c.type is ConstraintType.position:
            observed["thresholds"]["position_margin"] = self.settings.position_margin
        return e.model_copy(update={"observed": observed})
