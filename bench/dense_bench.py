"""Dense scenes (9–18 instances): baseline vs reference harness per profile, and where the
count is lost (issue 30).

Prompts: "<N> <colour> <objects>" ("seven green croissants" generalised: N from 9 to 18 as an
English number word, the object from GenEval's names, the colour from GenEval's ten; drawn
with ``random.Random(30)``), plus GenEval-sized controls (N from 2 to 4) for comparison.
Constraints are the rule extractor's reading (an exact ``count`` and a ``color`` with
``min_count`` N). Each harness runs through ``HarnessRuntime`` on ``SimGenerator`` (the
profile) with the ``sim-detector`` verifier, seeds 0..S−1; the exact inspector
(``SimInspector``) judges the selected image.

Where a failed count is lost, per image of the reference harness (its layout planner runs for
counts): **planner** — the selected program's layout has a number of boxes of the class other
than N; **world** — the boxes are right but the scene the simulator drew (``manifest``, which
no harness or verifier reads) holds another number of the class; **verifier** — the scene
holds N but the inspector counts otherwise. For the baseline (no layout) only world and
verifier apply.

Usage::

    python bench/dense_bench.py [--profile NAME ...] [--n 12] [--seeds 2] [--out FILE]

Exit status 0 always (a benchmark prints).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoharness.tasks.models import Task  # noqa: E402
from evoharness.trace.aggregate import wilson_interval  # noqa: E402

DATA = Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared")) / "data"
PROFILES = ("sdxl-like", "flux-like", "sd15-like")
WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen"
).split()


def prompts(n: int, low: int, high: int, tag: str) -> list[Task]:
    """``n`` tasks "<N> <colour> <plural>" with N in ``low..high`` (module docstring)."""
    from evoharness.runtime.extract import RuleExtractor
    from evoharness.vocab import plural

    names = [
        w.strip()
        for w in (DATA / "geneval" / "object_names.txt").read_text(encoding="utf-8").splitlines()
        if w.strip() and w.strip() != "person"
    ]
    colors = "red orange yellow green blue purple pink brown black white".split()
    rng = random.Random(30 + low)
    ex = RuleExtractor()
    out = []
    while len(out) < n:
        k, name, col = rng.randint(low, high), rng.choice(names), rng.choice(colors)
        p = f"{WORDS[k]} {col} {plural(name)}"
        cons = ex.extract(p)
        if any(c.type.value == "count" and c.min_count == k for c in cons):
            out.append(
                Task(
                    task_id=f"{tag}-{len(out):03d}",
                    prompt=p,
                    task_family=tag,
                    constraints=cons,
                    metadata={"n": k, "class": name},
                )
            )
    return out


def run(profile: str, harness_dir: Path, tasks: list[Task], seeds: int) -> dict[str, Any]:
    """Pass rate and the cause of each failed count (module docstring) of one harness."""
    from evoharness.harness import load_dir
    from evoharness.runtime import HarnessRuntime
    from evoharness.sim import SimDetector, SimGenerator, SimInspector
    from evoharness.sim.profiles import load_profile
    from evoharness.vocab import class_of

    insp = SimInspector()
    rt = HarnessRuntime(
        load_dir(harness_dir), SimGenerator(load_profile(profile)), SimDetector(inspector=insp)
    )
    passed = counted = n = 0
    causes: Counter[str] = Counter()
    drawn_over_n: list[float] = []
    for t in tasks:
        k, cls = int(t.metadata["n"]), class_of(str(t.metadata["class"]))
        for s in range(seeds):
            res = rt.run_task(t, s)
            ev = insp.verify(res.image, t.constraints)
            ok = {e.constraint_id: e.status.value == "pass" for e in ev}
            n += 1
            passed += all(ok.values())
            count_ok = all(v for cid, v in ok.items() if cid.startswith("count:"))
            counted += count_ok
            img = res.images[res.selected]
            drawn = sum(1 for o in (img.manifest or {}).get("objects", []) if o.get("class") == cls)
            drawn_over_n.append(drawn / k)
            if count_ok:
                continue
            layout = res.programs[res.selected].layout
            boxes = sum(1 for li in layout or [] if li.label == cls)
            if layout is not None and boxes != k:
                causes["planner"] += 1
            elif drawn != k:
                causes["world"] += 1
            else:
                causes["verifier"] += 1
    return {
        "images": n,
        "pass": passed,
        "count_pass": counted,
        "causes": dict(causes),
        "drawn_over_n": round(sum(drawn_over_n) / max(1, len(drawn_over_n)), 3),
    }


def _cell(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]" if n else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", help="(repeatable; default the three)")
    ap.add_argument("--n", type=int, default=12, help="prompts per set")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", type=Path, help="also write the figures as JSON here")
    a = ap.parse_args(argv)
    sets = {"dense 9-18": prompts(a.n, 9, 18, "dense"), "control 2-4": prompts(a.n, 2, 4, "ctl")}
    harnesses = [ROOT / "harnesses" / "baseline", ROOT / "harnesses" / "reference"]
    print(f"# python bench/dense_bench.py {' '.join(argv or sys.argv[1:])}")
    print(
        "prompt accuracy | count accuracy (Wilson 95%); drawn/N: mean share of the asked "
        "instances the world drew; failed counts by cause"
    )
    figures: dict[str, Any] = {}
    for profile in a.profile or list(PROFILES):
        print(f"\n{profile}\n| set | harness | prompt | count | drawn/N | failed count: cause |")
        print("|---|---|---|---|---|---|")
        for set_name, tasks in sets.items():
            for h in harnesses:
                r = run(profile, h, tasks, a.seeds)
                figures.setdefault(profile, {}).setdefault(set_name, {})[h.name] = r
                print(
                    f"| {set_name} | {h.name} | {_cell(r['pass'], r['images'])} | "
                    f"{_cell(r['count_pass'], r['images'])} | {r['drawn_over_n']:.2f} | "
                    f"{r['causes']} |",
                    flush=True,
                )
    if a.out:
        a.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
