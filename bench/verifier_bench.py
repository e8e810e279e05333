"""Internal vs official verifier on GenEval prompts, and the pixel quality score's spread.

Renders every GenEval prompt (``../shared/data/geneval/evaluation_metadata.jsonl``) verbatim
with the simulator's defaults (the baseline program) for each seed, then scores each image
twice: with ``SimDetector`` (evolution's internal verifier, which errs like a detector + VLM)
and with the exact ``SimInspector`` (the official scorer, GenEval's rules). Prints GenEval
per-tag accuracy and overall for both, the per-constraint-type agreement between them (with
Wilson 95% intervals), and the quality score (noise, clipping, seams) of the same images at
guidance 5 and at guidance 14 (over-saturated, noisier).

Usage: ``python bench/verifier_bench.py [--seeds 2] [--quick]`` (``--quick``: 90 prompts
stratified by tag, one seed, < 1 min on one core).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoharness.program import GenerationParams, Program  # noqa: E402
from evoharness.sim import SimDetector, SimGenerator, SimInspector  # noqa: E402
from evoharness.tasks.builders import build_tasks  # noqa: E402
from evoharness.tasks.geneval_score import geneval_scores, task_tag  # noqa: E402


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score 95% interval of k successes in n (E. B. Wilson, JASA 1927)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    shared = Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared"))
    tasks = build_tasks("geneval", shared / "data/geneval/evaluation_metadata.jsonl").tasks
    seeds = [0] if args.quick else list(range(args.seeds))
    if args.quick:
        by_tag: dict[str, list] = collections.defaultdict(list)
        for t in tasks:
            by_tag[task_tag(t)].append(t)
        tasks = [t for ts in by_tag.values() for t in ts[:15]]
    gen, exact = SimGenerator(), SimInspector()
    det = SimDetector(inspector=exact)
    internal: dict[str, list] = {}
    official: dict[str, list] = {}
    agree: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    t0 = time.perf_counter()
    for t in tasks:
        for s in seeds:
            png = gen.generate(Program(prompt=t.prompt, seed=s)).png
            a, b = det.verify(png, t.constraints), exact.verify(png, t.constraints)
            internal[f"{t.task_id}@{s}"], official[f"{t.task_id}@{s}"] = a, b
            for c, ea, eb in zip(t.constraints, a, b, strict=True):
                agree[c.type.value][0] += ea.status == eb.status
                agree[c.type.value][1] += 1
    dt = time.perf_counter() - t0
    gi, go = geneval_scores(tasks, internal), geneval_scores(tasks, official)
    print(f"{len(tasks)} GenEval prompts × {len(seeds)} seeds, baseline program, {dt:.0f} s")
    print(f"{'tag':<14} {'internal':>9} {'official':>9} {'images':>7}")
    for tag in go["per_tag"]:
        i, o = gi["per_tag"][tag], go["per_tag"][tag]
        print(f"{tag:<14} {i['accuracy']:>9.3f} {o['accuracy']:>9.3f} {o['images']:>7}")
    print(f"{'overall':<14} {gi['overall']:>9.3f} {go['overall']:>9.3f}")
    print(f"\n{'constraint':<10} {'agreement':>9}  95% interval     n")
    for kind, (k, n) in sorted(agree.items()):
        lo, hi = wilson(k, n)
        print(f"{kind:<10} {k / n:>9.3f}  [{lo:.3f}, {hi:.3f}]  {n}")
    print("\nquality score (min, median, max) of the same prompts, seed 0:")
    for g in (5.0, 14.0):
        qs = []
        for t in tasks[:: max(1, len(tasks) // 60)]:
            png = gen.generate(
                Program(prompt=t.prompt, seed=0, params=GenerationParams(guidance_scale=g))
            ).png
            q = exact.inspect(png, read_text=False, quality=True).quality
            assert q is not None
            qs.append(q)
        for name in ("noise_sigma", "clipped_fraction", "seam_fraction", "score"):
            v = sorted(getattr(q, name) for q in qs)
            print(f"  guidance {g:>4}: {name:<16} {v[0]:.3f} {v[len(v) // 2]:.3f} {v[-1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
