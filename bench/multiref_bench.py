"""Multi-reference tasks on the embedded world (issue 32): pass rate per reference count and
the frequency of each failure mode.

Builds the embedded reference library (``evoharness.sim.reference_library``) into a
temporary local store, writes ``--tasks`` multi-reference tasks per reference count (2, 3
and 4 by default; ``evoharness.tasks.builders.multiref``, task seed 0) and renders each for
seeds 0..N−1 with the embedded world (``SimGenerator``, ``--profile``, default
``sdxl-like``). The program is the task's prompt verbatim with its references (what a
harness whose agent carries the request's references hands the generator; ``--harness DIR``
runs the harness instead, with the agent tools added: the rule planner, embedded search,
``max_references`` 4). Each image is scored by the exact pixel inspector
(``SimInspector``) on the task's per-reference constraints.

Prints, per reference count: images, the all-constraints pass rate with a Wilson 95%
interval, the pass rate of each constraint kind (count = exactly once, colour, texture), and
the world's failure modes per reference from the generator's manifest (ground truth, for
the bench only; the inspector never reads it): omitted, duplicated, the glyph drawn beside,
pasted look; and how often the inspector failed the count, colour or texture of a reference
the world drew once. ``--out`` writes every image's verdicts and outcomes as JSON.

Usage::

    python bench/multiref_bench.py [--seeds 16] [--tasks 8] [--refs 2 3 4]
        [--profile NAME] [--harness DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoharness.local_store import LocalArtifactStore  # noqa: E402
from evoharness.program import Program  # noqa: E402
from evoharness.runtime.runtime import task_references  # noqa: E402
from evoharness.sim import SimGenerator, SimInspector  # noqa: E402
from evoharness.sim import reference_library as rl  # noqa: E402
from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile  # noqa: E402
from evoharness.tasks.builders.multiref import build_multiref  # noqa: E402
from evoharness.trace.aggregate import wilson_interval  # noqa: E402

AGENT_TOOLS = [
    {"name": "facts", "kind": "search", "provider": "embedded"},
    {"name": "know-how", "kind": "query_knowledge"},
    {"name": "agent", "kind": "agent", "backend": "rule", "max_references": 4},
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=8, help="tasks per reference count")
    ap.add_argument("--refs", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--profile", default=DEFAULT_PROFILE)
    ap.add_argument("--harness", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.tasks < 1:
        ap.error("--seeds and --tasks must be >= 1")

    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name)
    rl.build(LocalArtifactStore(root))
    prefix = f"{root}/{rl.DEFAULT_PREFIX}"  # local paths: the generator reads them directly
    gen = SimGenerator(load_profile(args.profile))
    runtime = None
    if args.harness is not None:
        from evoharness.harness.io import load_dir
        from evoharness.harness.patch import apply_patch
        from evoharness.runtime.runtime import HarnessRuntime

        ops = [{"op": "add", "path": "/tools/tools/-", "value": t} for t in AGENT_TOOLS]
        harness = apply_patch(load_dir(args.harness), {"responsibility": "tools", "ops": ops})
        runtime = HarnessRuntime(harness, gen)
    inspector = SimInspector(ocr=False)
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    for k in args.refs:
        for task in build_multiref(0, args.tasks, refs=(k,), prefix=prefix):
            refs = task_references(task)
            for seed in range(args.seeds):
                if runtime is None:
                    img = gen.generate(Program(prompt=task.prompt, seed=seed, references=refs))
                    manifest = img.manifest or {}
                    png = img.png
                else:
                    res = runtime.run(task.prompt, seed, refs)
                    png, manifest = res.image.png, res.image.manifest or {}
                ev = inspector.verify(png, task.constraints)
                rows.append(
                    {
                        "refs": k,
                        "task_id": task.task_id,
                        "seed": seed,
                        "verdicts": {e.constraint_id: e.status.value for e in ev},
                        "outcomes": manifest.get("reference_outcomes", []),
                    }
                )
    elapsed = time.time() - t0

    header = (
        "| refs | images | all pass | 95% Wilson | count = 1 | colour | texture "
        "| omitted | duplicated | glyph beside | pasted | drawn once, count failed "
        "| drawn once, colour failed |"
    )
    lines = [header, "|" + "---|" * 13]
    summary: dict[str, Any] = {}
    for k in args.refs:
        rs = [r for r in rows if r["refs"] == k]
        n = len(rs)
        ok = sum(all(v == "pass" for v in r["verdicts"].values()) for r in rs)
        lo, hi = wilson_interval(ok, n)
        kinds: dict[str, list[int]] = {"count": [0, 0], "color": [0, 0], "texture": [0, 0]}
        modes: Counter[str] = Counter()
        per_ref = 0
        once = Counter()
        once_n = 0
        for r in rs:
            for cid, v in r["verdicts"].items():
                kind = cid.split("-", 1)[1]
                kinds[kind][0] += v == "pass"
                kinds[kind][1] += 1
            for o in r["outcomes"]:
                per_ref += 1
                modes["omitted"] += o["outcome"] == "omitted"
                modes["duplicated"] += o["duplicated"]
                modes["glyph_beside"] += o["glyph_beside"]
                modes["pasted"] += o["pasted"]
                if o["outcome"] == "drawn" and not o["duplicated"] and not o["glyph_beside"]:
                    i = o["index"] + 1
                    once_n += 1
                    once["count"] += r["verdicts"].get(f"ref{i}-count") != "pass"
                    once["color"] += r["verdicts"].get(f"ref{i}-color") != "pass"

        def rate(x: int, d: int) -> str:
            return f"{x / d:.3f}" if d else "n/a"

        lines.append(
            f"| {k} | {n} | {ok / n:.3f} | [{lo:.3f}, {hi:.3f}] "
            f"| {rate(*kinds['count'])} | {rate(*kinds['color'])} | {rate(*kinds['texture'])} "
            f"| {rate(modes['omitted'], per_ref)} | {rate(modes['duplicated'], per_ref)} "
            f"| {rate(modes['glyph_beside'], per_ref)} | {rate(modes['pasted'], per_ref)} "
            f"| {rate(once['count'], once_n)} | {rate(once['color'], once_n)} |"
        )
        summary[str(k)] = {
            "images": n,
            "all_pass": ok / n,
            "wilson95": [lo, hi],
            "kinds": {kk: (v[0] / v[1] if v[1] else None) for kk, v in kinds.items()},
            "modes_per_reference": {m: modes[m] / per_ref for m in modes} if per_ref else {},
            "references": per_ref,
        }
    cond = f"harness {args.harness}" if args.harness else "program verbatim"
    print(
        f"multiref bench: profile {args.profile}, {cond}, {args.tasks} tasks per reference "
        f"count x seeds 0..{args.seeds - 1}, exact inspector; {elapsed:.0f} s"
    )
    print("\n".join(lines))
    print(
        "failure modes are per reference, from the generator's manifest (ground truth); "
        "'drawn once, X failed': the inspector's verdict on a reference the world drew once"
    )
    if args.out is not None:
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
