"""Benchmark of the embedded CPU world: simulator and inspector speed, inspector accuracy.

Prints generator images/s, object-inspection images/s (every world class, OCR excluded) and OCR
images/s on their own, each for 1 process and for 2 processes (``OMP_NUM_THREADS=1`` per
process; wall-clock figures, so on a shared machine they are lower bounds), and the
inspector's accuracy against the scene manifests of what the simulator actually drew, with
Wilson 95% intervals, split by the number of objects drawn in the image (1–8, 9–18, more):

- presence precision / recall: detections matched one-to-one to manifest objects of the same
  class by box IoU >= 0.5 (greedy, best IoU first);
- count: per (image, class drawn or detected), detected count == drawn count;
- colour: matched objects the simulator recoloured, detected colour == drawn colour;
- position: pairs of matched objects, GenEval relation set from the detected boxes == from
  the drawn boxes;
- text: sign panels of <= 12 characters, OCR text == drawn text (exact, case-insensitive);
- texture (with ``--textures``): matched objects, detected texture == drawn texture (``plain``
  when none was drawn; a body too small to read counts as wrong), and of those the textured
  ones alone, also split by the drawn box's side √(w·h) ("texture, box < 64 px", 64–96,
  ≥ 96 px; textured ones); "texture unread (small)" is the share of matched objects whose
  body was too small to read (the inspector answers ``uncertain`` for them);
- shape (with ``--shapes``): matched objects, outlined shape read == drawn (None = no
  outline), and of those the outlined ones alone.

- proximity (with ``--proximity``, instead of the figures above): scenes of two object
  phrases joined by a proximity phrase ("next to", "beside", "on side of", "near", "close
  to"; a third unrelated phrase in a third of them), drawn with the default profile but
  ``relation_honoured`` 0.5 so that about half the pairs are drawn close; truth = T2I-CompBench's
  rule on the drawn boxes (``evoharness.tasks.proximity``); the exact inspector's verdict and
  ``SimDetector``'s (the internal verifier) against it, on the honoured (drawn close) and the
  unhonoured (drawn apart) scenes separately. Scenes where either object was not drawn are
  left out (counted).
- depth (with ``--depth``, issue 19): N prompts "a photo of a A behind / in front of a B"
  (two classes of the pool, each relation half the time), drawn twice — *honoured* (the
  profile with ``relation_honoured`` 1 and ``composition_default`` 0: the asked order, or
  apart when it does not fit) and *unhonoured* (``relation_honoured`` 0,
  ``composition_default`` = ``composition_swap`` = 1: the opposite order) — and checked:
  separation (of the images whose manifest has the pair drawn overlapping, both objects
  matched by class and box IoU >= 0.5), and the inspector's verdict on the prompt's depth
  constraint against the manifest's truth (pass iff the asked order was drawn), per
  variant; plus images/s of the inspector on those scenes (1 process).

Scenes: 1–4 object phrases (counts 1–3) by default; ``--crowded``: 9–18 instances asked for
(3–6 phrases, counts 2–4), the crowded-scene benchmark of issue 19. ``--classes`` picks the
class pool the prompts name: ``coco`` (GenEval's 80, the default), ``extra`` (the world's other
classes, ``vocab.EXTRA_CLASSES``) or ``world`` (all of them). ``--textures``: half the object
phrases get a texture or material word (``vocab.TEXTURES``, issue 19); without it the prompts
are the same as before textures existed; ``--shapes`` likewise with a shape word
(``vocab.SHAPES``).

Usage: ``python bench/sim_bench.py [--images 500] [--quick] [--classes coco|extra|world]
[--crowded] [--textures] [--shapes] [--no-speed] [--proximity] [--depth]`` (``--quick``: 60
images, < 1 min).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

WORDS = [
    "OPEN",
    "SALE",
    "EXIT",
    "HELLO",
    "BAKERY",
    "HOTEL",
    "TAXI",
    "CAFE 24",
    "RADIO 7",
    "GARDEN",
    "NO ENTRY",
    "FRESH FISH",
    "WELCOME",
    "LIBRARY",
    "MARKET",
    "THANK YOU",
]


#: Drawn-box sides (px, √(w·h)) the textured objects' accuracy is split by.
TEXTURE_SIZES = (("box < 64 px", 0, 64), ("box 64-96 px", 64, 96), ("box >= 96 px", 96, 10**9))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """Proportion k/n with its Wilson score interval (Wilson 1927)."""
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return p, c - h, c + h


def class_pool(name: str) -> tuple[str, ...]:
    """The classes bench prompts name: ``coco`` (GenEval's 80), ``extra`` or ``world``."""
    from evoharness.vocab import CLASSES, EXTRA_CLASSES, WORLD_CLASSES

    pools = {"coco": CLASSES, "extra": EXTRA_CLASSES, "world": WORLD_CLASSES}
    if name not in pools:
        raise ValueError(f"--classes: {name!r} is not one of {sorted(pools)}")
    return pools[name]


def programs(
    n: int,
    seed: int = 12345,
    pool: str = "coco",
    crowded: bool = False,
    textures: bool = False,
    shapes: bool = False,
) -> list:
    """``n`` seeded bench programs: 1–4 object phrases (counts 1–3, 60% coloured, one clause
    each) and a quoted sign in a third of them; ``crowded``: 3–6 phrases of counts 2–4 adding
    up to 9–18 instances. Class names come from ``class_pool(pool)``, plural after a count
    above one. ``textures``: each phrase gets a texture word w.p. 0.5, drawn from a second
    generator so the rest of the prompts stay as without it; ``shapes`` likewise."""
    from evoharness.program import Program
    from evoharness.vocab import COLORS, SHAPES, TEXTURES, plural

    classes = class_pool(pool)
    rng = np.random.default_rng(seed)
    trng = np.random.default_rng(seed + 1)
    srng = np.random.default_rng(seed + 2)
    tex_names = list(TEXTURES)
    shape_names = list(SHAPES)
    out = []
    for i in range(n):
        counts: list[int] | None = None
        if crowded:
            while True:
                k = int(rng.integers(3, 7))
                counts = [int(x) for x in rng.integers(2, 5, size=k)]
                if 9 <= sum(counts) <= 18:
                    break
        else:
            k = int(rng.integers(1, 5))
        parts = []
        for j, c in enumerate(rng.choice(len(classes), k, replace=False)):
            col = list(COLORS)[int(rng.integers(10))] if rng.random() < 0.6 else ""
            m = counts[j] if counts is not None else int(rng.integers(1, 4))
            name = classes[int(c)]
            if pool != "coco":  # GenEval's 80 keep the singular the bench always used
                name = plural(name) if m > 1 else name
            tex = ""
            if textures and trng.random() < 0.5:
                tex = TEXTURES[tex_names[int(trng.integers(len(tex_names)))]][0]
            shp = ""
            if shapes and srng.random() < 0.5:
                shp = SHAPES[shape_names[int(srng.integers(len(shape_names)))]][0]
            words = [str(m), col, shp, tex, name]
            parts.append(" ".join(x for x in words if x))
        prompt = "a photo of " + ". ".join(parts)
        if rng.random() < 0.33:
            prompt += f'. a sign that says "{WORDS[int(rng.integers(len(WORDS)))]}"'
        out.append(Program(prompt=prompt, seed=i, params={"guidance_scale": 7.5}))
    return out


PROXIMITY_PHRASES = ("next to", "beside", "on side of", "near", "close to")


def proximity_programs(n: int, seed: int = 54321, pool: str = "coco") -> list:
    """``n`` seeded programs "a photo of a [colour] A <proximity phrase> a [colour] B" (two
    distinct classes of ``class_pool(pool)``; ``PROXIMITY_PHRASES`` in turn; a third,
    unrelated phrase in its own clause w.p. 1/3). Returns (program, subject, target) triples."""
    from evoharness.program import Program
    from evoharness.vocab import COLORS

    classes = class_pool(pool)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a, b, c = (classes[int(k)] for k in rng.choice(len(classes), 3, replace=False))
        cols = [list(COLORS)[int(rng.integers(10))] if rng.random() < 0.5 else "" for _ in "ab"]
        phrase = PROXIMITY_PHRASES[i % len(PROXIMITY_PHRASES)]
        prompt = f"a photo of a {cols[0]} {a} {phrase} a {cols[1]} {b}".replace("  ", " ")
        if rng.random() < 1 / 3:
            prompt += f". a {c}"
        out.append((Program(prompt=prompt, seed=i, params={"guidance_scale": 7.5}), a, b))
    return out


def proximity_accuracy(n: int, pool: str = "coco") -> dict[str, tuple[int, int]]:
    """Tallies (hits, total) of the proximity figures (module docstring) on ``n`` scenes."""
    from evoharness.sim import SimDetector, SimGenerator, SimInspector
    from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile
    from evoharness.sim.reader import read_prompt
    from evoharness.tasks.models import Constraint
    from evoharness.tasks.proximity import proximity

    params = load_profile(DEFAULT_PROFILE).model_copy(update={"relation_honoured": 0.5})
    gen = SimGenerator(params)
    inspector = SimInspector(ocr=False)
    detector = SimDetector(inspector=inspector)
    tally = {k: [0, 0] for k in ("exact close", "exact apart", "detector close", "detector apart")}
    skipped = 0
    for prog, a, b in proximity_programs(n, pool=pool):
        img = gen.generate(prog)
        sa = [o for o in img.manifest["objects"] if o["class"] == a]
        sb = [o for o in img.manifest["objects"] if o["class"] == b]
        if not sa or not sb:
            skipped += 1
            continue
        relation = read_prompt(prog.prompt).relations[0].relation
        truth = proximity(sa[0]["box"], sb[0]["box"]).holds
        c = Constraint(constraint_id="p", type="position", subject=a, relation=relation, value=b)
        exact = inspector.verify(img.png, [c])[0].passed
        internal = detector.verify(img.png, [c])[0].passed
        side = "close" if truth else "apart"
        for who, verdict in (("exact", exact), ("detector", internal)):
            tally[f"{who} {side}"][1] += 1
            tally[f"{who} {side}"][0] += verdict == truth
    out: dict[str, tuple[int, int]] = {
        "inspector, drawn close": (tally["exact close"][0], tally["exact close"][1]),
        "inspector, drawn apart": (tally["exact apart"][0], tally["exact apart"][1]),
        "sim-detector, drawn close": (tally["detector close"][0], tally["detector close"][1]),
        "sim-detector, drawn apart": (tally["detector apart"][0], tally["detector apart"][1]),
    }
    out["scenes without A or B drawn"] = (skipped, n)
    return out


def _gen_chunk(progs: list) -> list:
    from evoharness.sim import SimGenerator

    g = SimGenerator()
    return [(r.png, r.manifest) for r in (g.generate(p) for p in progs)]


def _inspect_chunk(args: tuple) -> list:
    from evoharness.sim import SimInspector

    pngs, ocr, *rest = args
    shapes = bool(rest and rest[0])
    ins = SimInspector(ocr=ocr)
    out = []
    for png in pngs:
        sc = ins.inspect(png, read_text=ocr, shapes=shapes)
        dets = [(d.cls, d.box, d.color, d.texture, d.shape) for d in sc.detections]
        out.append((dets, sc.signs))
    return out


def _timed(fn, chunks, workers: int) -> tuple[list, float]:
    t0 = time.perf_counter()
    if workers == 1:
        res = [fn(c) for c in chunks]
    else:
        with ProcessPoolExecutor(workers) as ex:
            res = list(ex.map(fn, chunks))
    return [x for r in res for x in r], time.perf_counter() - t0


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / u if u > 0 else 0.0


def accuracy(images: list, seen: list, texts: list) -> dict[str, tuple[int, int]]:
    """Tallies (hits, total) per figure; see the module docstring."""
    from evoharness.sim.judging import normalized_edit_distance
    from evoharness.tasks.position import relative_position

    tp = n_det = n_true = 0
    cnt = [0, 0]
    col = [0, 0]
    pos = [0, 0]
    txt = [0, 0]
    tex = [0, 0]
    tex_on = [0, 0]
    tex_unread = [0, 0]
    tex_size = {label: [0, 0] for label, _, _ in TEXTURE_SIZES}
    shp = [0, 0]
    shp_on = [0, 0]
    for (_, man), dets, signs in zip(images, seen, texts, strict=True):
        truth = man["objects"]
        n_true += len(truth)
        n_det += len(dets)
        pairs = sorted(
            (
                (_iou(t["box"], d[1]), ti, di)
                for ti, t in enumerate(truth)
                for di, d in enumerate(dets)
                if t["class"] == d[0]
            ),
            reverse=True,
        )
        used_t, used_d, match = set(), set(), {}
        for iou, ti, di in pairs:
            if iou >= 0.5 and ti not in used_t and di not in used_d:
                used_t.add(ti)
                used_d.add(di)
                match[ti] = di
        tp += len(match)
        classes = {t["class"] for t in truth} | {d[0] for d in dets}
        for c in classes:
            cnt[1] += 1
            cnt[0] += sum(t["class"] == c for t in truth) == sum(d[0] == c for d in dets)
        for ti, di in match.items():
            if truth[ti]["color"] is not None:
                col[1] += 1
                col[0] += dets[di][2] == truth[ti]["color"]
            want = truth[ti].get("texture") or "plain"
            tex[1] += 1
            tex[0] += dets[di][3] == want
            tex_unread[1] += 1
            tex_unread[0] += dets[di][3] is None
            if want != "plain":
                tex_on[1] += 1
                tex_on[0] += dets[di][3] == want
                x0, y0, x1, y1 = truth[ti]["box"]
                side = math.sqrt((x1 - x0) * man["width"] * (y1 - y0) * man["height"])
                for label, lo_px, hi_px in TEXTURE_SIZES:
                    if lo_px <= side < hi_px:
                        tex_size[label][1] += 1
                        tex_size[label][0] += dets[di][3] == want
            outline = truth[ti].get("shape")
            shp[1] += 1
            shp[0] += dets[di][4] == outline
            if outline is not None:
                shp_on[1] += 1
                shp_on[0] += dets[di][4] == outline
        items = list(match.items())
        for a in range(len(items)):
            for b in range(a + 1, len(items)):
                (ta, da), (tb, db) = items[a], items[b]
                pos[1] += 1
                pos[0] += relative_position(truth[ta]["box"], truth[tb]["box"]) == (
                    relative_position(dets[da][1], dets[db][1])
                )
        for t in man["texts"]:
            if len(t["text"]) <= 12 and signs is not None:
                txt[1] += 1
                txt[0] += any(normalized_edit_distance(s, t["text"]) == 0 for s, _ in signs)
    return {
        "presence precision": (tp, n_det),
        "presence recall": (tp, n_true),
        "count": (cnt[0], cnt[1]),
        "colour": (col[0], col[1]),
        "position": (pos[0], pos[1]),
        "text exact (<= 12 chars)": (txt[0], txt[1]),
        "texture (all matched)": (tex[0], tex[1]) if tex_on[1] else (0, 0),
        "texture (textured ones)": (tex_on[0], tex_on[1]),
        **{f"texture, {k}": (v[0], v[1]) for k, v in tex_size.items()},
        "texture unread (small)": (tex_unread[0], tex_unread[1]) if tex_on[1] else (0, 0),
        "shape (all matched)": (shp[0], shp[1]) if shp_on[1] else (0, 0),
        "shape (outlined ones)": (shp_on[0], shp_on[1]),
    }


def depth_figures(n: int, pool: str = "coco", seed: int = 777) -> dict[str, tuple[int, int]]:
    """The ``--depth`` tallies (hits, total) of the module docstring, and the inspector's
    images/s on the depth scenes under key ``"speed"`` as (images, milliseconds)."""
    from evoharness.program import Program
    from evoharness.sim import SimGenerator, SimInspector
    from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile
    from evoharness.tasks.models import Constraint, ConstraintType

    classes = class_pool(pool)
    rng = np.random.default_rng(seed)
    base = load_profile(DEFAULT_PROFILE)
    variants = {
        "honoured": base.model_copy(update={"relation_honoured": 1.0, "composition_default": 0.0}),
        "unhonoured": base.model_copy(
            update={"relation_honoured": 0.0, "composition_default": 1.0, "composition_swap": 1.0}
        ),
    }
    ins = SimInspector(ocr=False)
    out: dict[str, list[int]] = {"separation (overlapping pair, both found)": [0, 0]}
    t_ms, n_img = 0.0, 0
    for i in range(n):
        a, b = (classes[int(j)] for j in rng.choice(len(classes), 2, replace=False))
        rel = "behind" if rng.random() < 0.5 else "in front of"
        prog = Program(prompt=f"a photo of a {a} {rel} a {b}", seed=i)
        c = Constraint(
            constraint_id="d", type=ConstraintType.position, subject=a, relation=rel, value=b
        )
        for name, params in variants.items():
            img = SimGenerator(params).generate(prog)
            objs = img.manifest["objects"]
            t0 = time.perf_counter()
            scene = ins.inspect(img.png, read_text=False)
            t_ms += 1000 * (time.perf_counter() - t0)
            n_img += 1
            ev = ins.judge(c, scene)
            fronts = [o for o in objs if "in_front_of" in o]
            drawn = None
            if fronts:
                f, k = fronts[0], objs[fronts[0]["in_front_of"]]
                drawn = "in front of" if f["class"] == a else "behind"
                sep = out["separation (overlapping pair, both found)"]
                sep[1] += 1
                sep[0] += all(
                    any(
                        d.cls == o["class"] and _iou(d.box, o["box"]) >= 0.5
                        for d in scene.detections
                    )
                    for o in (f, k)
                )
            key = f"depth verdict, {name} scenes"
            out.setdefault(key, [0, 0])
            out[key][1] += 1
            out[key][0] += (ev.status.value == "pass") == (drawn == rel)
            if drawn is not None:
                key = f"depth verdict, {name}, overlapping"
                out.setdefault(key, [0, 0])
                out[key][1] += 1
                out[key][0] += (ev.status.value == "pass") == (drawn == rel)
    res = {k: (v[0], v[1]) for k, v in out.items()}
    res["speed"] = (n_img, int(t_ms))
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="60 images (under a minute)")
    ap.add_argument("--classes", default="coco", choices=("coco", "extra", "world"))
    ap.add_argument("--crowded", action="store_true", help="9-18 instances asked per image")
    ap.add_argument("--textures", action="store_true", help="texture words in half the phrases")
    ap.add_argument("--shapes", action="store_true", help="shape words in half the phrases")
    ap.add_argument("--no-speed", action="store_true", help="accuracy only (no timings)")
    ap.add_argument(
        "--proximity", action="store_true", help="only the next to / near figures (no timings)"
    )
    ap.add_argument("--depth", action="store_true", help="depth relations only (issue 19)")
    args = ap.parse_args(argv)
    n = 60 if args.quick else args.images
    if args.depth:
        figures = depth_figures(n, args.classes)
        n_img, ms = figures.pop("speed")
        print(
            f"depth bench: {n} prompts x 2 variants, classes={args.classes}, load average "
            f"{os.getloadavg()[0]:.1f}; inspector {1000 * n_img / max(ms, 1):.1f} images/s "
            f"(1 proc, depth scenes), Wilson 95% interval:"
        )
        for name, (k, tot) in figures.items():
            p, lo, hi = wilson(k, tot)
            print(f"  {name:44s} {p:.3f}  [{lo:.3f}, {hi:.3f}]  ({k}/{tot})")
        return 0
    if args.proximity:
        print(
            f"proximity bench: {n} scenes of 512x512, classes={args.classes}, "
            f"relation_honoured 0.5, load average {os.getloadavg()[0]:.1f}; verdict == "
            "T2I-CompBench's rule on the drawn boxes, Wilson 95% interval:"
        )
        for name, (k, tot) in proximity_accuracy(n, args.classes).items():
            p, lo, hi = wilson(k, tot)
            print(f"  {name:28s} {p:.3f}  [{lo:.3f}, {hi:.3f}]  ({k}/{tot})")
        return 0
    progs = programs(
        n, pool=args.classes, crowded=args.crowded, textures=args.textures, shapes=args.shapes
    )
    print(
        f"simulator bench: {n} images of 512x512, classes={args.classes}"
        f"{' crowded (9-18 asked)' if args.crowded else ''}"
        f"{' with textures' if args.textures else ''}{' with shapes' if args.shapes else ''}, "
        f"cpu_count={os.cpu_count()}, "
        f"load average {os.getloadavg()[0]:.1f} (a shared machine: timings are lower bounds)"
    )
    # warm caches (sticker recolouring, templates, OCR models) outside the timings
    _gen_chunk(progs[:4])
    _inspect_chunk(([_gen_chunk(progs[:1])[0][0]], True))
    for workers in () if args.no_speed else (1, 2):
        chunks = [progs[i::workers] for i in range(workers)]
        images, t = _timed(_gen_chunk, chunks, workers)
        print(f"generator            {workers} proc: {n / t:6.1f} images/s")
        pngs = [png for png, _ in images]
        _, t = _timed(_inspect_chunk, [(pngs[i::workers], False) for i in range(workers)], workers)
        print(f"inspector objects    {workers} proc: {n / t:6.1f} images/s (OCR excluded)")
        with_text = [png for png, m in images if m["texts"]]
        if with_text:
            ocr_chunks = [(with_text[i::workers], True) for i in range(workers)]
            _, t_full = _timed(_inspect_chunk, ocr_chunks, workers)
            print(
                f"inspector with OCR   {workers} proc: {len(with_text) / t_full:6.1f} images/s "
                f"(images with a sign, objects + OCR)"
            )
    images = _gen_chunk(progs)
    seen = _inspect_chunk(([png for png, _ in images], True, args.shapes))
    buckets = {
        "all": (0, 10**9),
        "1-8 drawn": (0, 8),
        "9-18 drawn": (9, 18),
        ">18 drawn": (19, 10**9),
    }
    for label, (lo_n, hi_n) in buckets.items():
        idx = [i for i, (_, m) in enumerate(images) if lo_n <= len(m["objects"]) <= hi_n]
        if not idx:
            continue
        sub = [images[i] for i in idx]
        figures = accuracy(sub, [seen[i][0] for i in idx], [seen[i][1] for i in idx])
        n_obj = sum(len(m["objects"]) for _, m in sub)
        print(
            f"accuracy vs manifests, {label} ({len(sub)} images, {n_obj} drawn objects), "
            f"Wilson 95% interval:"
        )
        for name, (k, tot) in figures.items():
            if tot == 0:
                continue
            p, lo, hi = wilson(k, tot)
            print(f"  {name:26s} {p:.3f}  [{lo:.3f}, {hi:.3f}]  ({k}/{tot})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
