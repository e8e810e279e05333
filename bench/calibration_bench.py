"""Calibration of the embedded world's generator profiles to published GenEval scores.

For each profile, renders the baseline harness's program (the prompt verbatim, steps 30,
guidance 5.0, 512×512, no negative prompt, no layout — what ``harnesses/baseline`` compiles
to) for GenEval's 553 prompts × seeds 0–3, scores every image with the exact pixel inspector
(``evoharness.sim.SimInspector``) and GenEval's rules (``evoharness.tasks.geneval_score``: an
image is correct when all its constraints hold; overall = mean of the six tags), and prints
per tag: measured accuracy, its Wilson 95% interval, the published target and the signed
difference (measured − target); a tag more than 0.05 off, or whose interval misses the target,
is flagged.

Targets (published GenEval per-tag scores): SD 1.5 and SDXL from the GenEval paper's
table (Ghosh et al. 2023, djghosh13/geneval README); FLUX.1-dev from later papers' tables.

Usage::

    python bench/calibration_bench.py [--profile NAME ...] [--quick] [--seeds 4] [--workers 1]

``--quick``: a stratified subset (the first 24 prompts of each tag, seeds 0–3), under 3
minutes for the three profiles on one core. Exit status 0 always (a benchmark prints; the
tolerance is judged by the reader and the README).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TAGS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
#: Published GenEval per-tag scores (single, two, counting, colors, position, color_attr).
TARGETS: dict[str, tuple[float, ...]] = {
    "sd15-like": (0.97, 0.38, 0.35, 0.76, 0.04, 0.06),
    "sdxl-like": (0.98, 0.74, 0.39, 0.85, 0.15, 0.23),
    "flux-like": (0.98, 0.79, 0.73, 0.77, 0.22, 0.45),
}
PUBLISHED_OVERALL = {"sd15-like": 0.43, "sdxl-like": 0.55, "flux-like": 0.66}
DEFAULT_DATA = (
    Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared"))
    / "data"
    / "geneval"
    / "evaluation_metadata.jsonl"
)

_WORKER: dict[str, object] = {}


def _score_chunk(args: tuple[str, list[tuple[int, int]]]) -> list[tuple[int, int, bool]]:
    """(task index, seed, correct) for each job, in a worker (one generator + inspector)."""
    profile, jobs = args
    from evoharness.evidence import EvidenceStatus
    from evoharness.program import Program
    from evoharness.sim import SimGenerator, SimInspector
    from evoharness.sim.profiles import load_profile

    if _WORKER.get("profile") != profile:
        _WORKER.update(
            profile=profile, gen=SimGenerator(load_profile(profile)), insp=SimInspector()
        )
    gen, insp = _WORKER["gen"], _WORKER["insp"]
    tasks = _WORKER["tasks"]
    out = []
    for ti, seed in jobs:
        task = tasks[ti]  # type: ignore[index]
        program = Program(prompt=task.prompt, seed=seed)
        img = gen.generate(program)  # type: ignore[attr-defined]
        ev = insp.verify(img, task.constraints)  # type: ignore[attr-defined]
        out.append((ti, seed, all(e.status is EvidenceStatus.passed for e in ev)))
    return out


def _init(data: str) -> None:
    from evoharness.tasks.builders import build_geneval

    _WORKER["tasks"] = build_geneval(data)


def select(tasks: list, quick: bool, per_tag: int = 24) -> list[int]:
    """Indices of the tasks to render: all, or the first ``per_tag`` of each GenEval tag."""
    from evoharness.tasks.geneval_score import task_tag

    if not quick:
        return list(range(len(tasks)))
    seen: dict[str, int] = defaultdict(int)
    keep = []
    for i, t in enumerate(tasks):
        tag = task_tag(t)
        if seen[tag] < per_tag:
            seen[tag] += 1
            keep.append(i)
    return keep


def run_profile(
    profile: str, data: str, quick: bool, seeds: int, workers: int, per_tag: int | None = None
) -> dict:
    """Per-tag (correct, images) and wall seconds for one profile (``per_tag``: only the
    first ``per_tag`` prompts of each tag, overriding ``quick``)."""
    from evoharness.tasks.builders import build_geneval
    from evoharness.tasks.geneval_score import task_tag

    tasks = build_geneval(data)
    idx = select(tasks, True, per_tag) if per_tag else select(tasks, quick)
    jobs = [(i, s) for i in idx for s in range(seeds)]
    chunks = [(profile, jobs[k : k + 40]) for k in range(0, len(jobs), 40)]
    t0 = time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(workers, initializer=_init, initargs=(data,)) as ex:
            results = [r for part in ex.map(_score_chunk, chunks) for r in part]
    else:
        _init(data)
        results = [r for c in chunks for r in _score_chunk(c)]
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for ti, _seed, ok in results:
        t = tally[task_tag(tasks[ti])]
        t[0] += int(ok)
        t[1] += 1
    return {"tally": dict(tally), "seconds": time.perf_counter() - t0, "images": len(jobs)}


def report(profile: str, res: dict) -> list[str]:
    """Table lines (markdown) for one profile."""
    from evoharness.trace.aggregate import wilson_interval

    lines = [
        f"{profile}: {res['images']} images, {res['seconds']:.0f} s",
        "| tag | measured | 95% Wilson | target | Δ | n |",
        "|---|---|---|---|---|---|",
    ]
    accs = []
    for tag, target in zip(TAGS, TARGETS[profile], strict=True):
        k, n = res["tally"].get(tag, [0, 0])
        acc = k / n if n else float("nan")
        lo, hi = wilson_interval(k, n) if n else (float("nan"), float("nan"))
        accs.append(acc)
        flag = "" if abs(acc - target) <= 0.05 else "  <-- off by more than 0.05"
        if not flag and not lo <= target <= hi:
            flag = "  <-- target outside the 95% interval"
        lines.append(
            f"| {tag} | {acc:.3f} | [{lo:.3f}, {hi:.3f}] | {target:.2f} | {acc - target:+.3f} "
            f"| {n} |{flag}"
        )
    overall = sum(accs) / len(accs)
    pub = PUBLISHED_OVERALL[profile]
    lines.append(f"| overall | {overall:.3f} | | {pub:.2f} | {overall - pub:+.3f} | |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", choices=sorted(TARGETS), help="(repeatable)")
    ap.add_argument("--quick", action="store_true", help="stratified subset, < 3 minutes")
    ap.add_argument("--seeds", type=int, default=4, help="seeds 0..N-1 (default 4)")
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="GenEval evaluation_metadata.jsonl")
    a = ap.parse_args(argv)
    for profile in a.profile or list(TARGETS):
        res = run_profile(profile, a.data, a.quick, a.seeds, a.workers)
        print("\n".join(report(profile, res)), flush=True)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
