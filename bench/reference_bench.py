"""Baseline vs the hand-made reference harness on each generator profile, officially scored.

For each profile (``evoharness/sim/profiles``) and each harness (``harnesses/baseline``,
``harnesses/reference`` by default), runs the harness through ``HarnessRuntime`` on the
embedded world (``SimGenerator`` with that profile; the harness's own verification steps use
the internal ``sim-detector`` verifier, as in evolution) for GenEval's 553 prompts × seeds
0..N−1, and scores each selected image *officially*: the exact pixel inspector
(``evoharness.sim.SimInspector``) with GenEval's rules (``evoharness.tasks.geneval_score``: an
image is correct when all its constraints hold; overall = mean of the six tags). The runtime
drops conditioning a profile does not honour (``capability_drop``: layout on ``flux-like``).

Prints, per profile, a markdown table: per GenEval tag and overall, each harness's accuracy
with its Wilson 95% interval (overall: the mean of the six tags, with the interval of the
pooled image accuracy beside it), the reference − baseline difference, and the modelled
generator-seconds per task (``evoharness.sim.cost``: what the harness's extra attempts cost).

Usage::

    python bench/reference_bench.py [--profile NAME ...] [--seeds 2] [--workers 1] [--quick]
        [--harness DIR ...]

``--quick``: the first 24 prompts of each tag. Exit status 0 always (a benchmark prints; the
README and ``bench/results/`` hold the measured tables).
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
sys.path.insert(0, str(ROOT / "bench"))

from calibration_bench import DEFAULT_DATA, TAGS, TARGETS, select  # noqa: E402

HARNESSES = (ROOT / "harnesses" / "baseline", ROOT / "harnesses" / "reference")
_WORKER: dict[str, object] = {}


def _run_chunk(
    args: tuple[str, str, list[tuple[int, int]]],
) -> list[tuple[int, int, tuple[str, ...], float]]:
    """(task index, seed, official verdict per constraint, generator-seconds) per job, in a
    worker; the verdicts are ``EvidenceStatus`` values (``"pass"``, ``"fail"``,
    ``"uncertain"``) in the order of the task's constraints."""
    profile, harness_dir, jobs = args
    from evoharness.harness import load_dir
    from evoharness.runtime import HarnessRuntime
    from evoharness.sim import SimDetector, SimGenerator, SimInspector
    from evoharness.sim.profiles import load_profile

    if _WORKER.get("profile") != profile:
        _WORKER.update(profile=profile, gen=SimGenerator(load_profile(profile)))
    if "insp" not in _WORKER:
        insp = SimInspector()
        _WORKER.update(insp=insp, det=SimDetector(inspector=insp))
    if _WORKER.get("harness_dir") != harness_dir:
        _WORKER.update(harness_dir=harness_dir, harness=load_dir(harness_dir))
    rt = HarnessRuntime(_WORKER["harness"], _WORKER["gen"], _WORKER["det"])  # type: ignore[arg-type]
    insp, tasks = _WORKER["insp"], _WORKER["tasks"]
    out = []
    for ti, seed in jobs:
        task = tasks[ti]  # type: ignore[index]
        res = rt.run_task(task, seed)
        ev = insp.verify(res.image, task.constraints)  # type: ignore[attr-defined]
        statuses = tuple(e.status.value for e in ev)
        out.append((ti, seed, statuses, sum(im.seconds for im in res.images)))
    return out


def _init(tasks: list) -> None:
    _WORKER["tasks"] = tasks


def run_harness(
    profile: str,
    harness_dir: Path,
    tasks: list,
    jobs: list[tuple[int, int]],
    workers: int = 1,
) -> list[tuple[int, int, tuple[str, ...], float]]:
    """Run one harness on ``tasks`` and score each selected image officially.

    ``tasks``: ``evoharness.tasks.models.Task`` list; ``jobs``: (task index, seed) pairs.
    Each job runs the harness through ``HarnessRuntime`` on ``SimGenerator`` with generator
    profile ``profile`` (the harness's own checks by ``sim-detector``, which sees only the
    constraints the harness extracts from the prompt), then the exact inspector
    (``SimInspector.verify``) judges the selected image against the *task's* constraints.
    Returns, per job in order, ``(task index, seed, verdicts, generator-seconds)``: one
    ``EvidenceStatus`` value per constraint (``"pass"``/``"fail"``/``"uncertain"``) and the
    modelled seconds of all the job's generations (``evoharness.sim.cost``). ``workers`` > 1
    runs chunks of 20 jobs in that many processes. Raises what the runtime raises (an invalid
    harness directory: ``load_dir``'s error)."""
    chunks = [(profile, str(harness_dir), jobs[k : k + 20]) for k in range(0, len(jobs), 20)]
    if workers > 1:
        with ProcessPoolExecutor(workers, initializer=_init, initargs=(tasks,)) as ex:
            return [r for part in ex.map(_run_chunk, chunks) for r in part]
    _init(tasks)
    return [r for c in chunks for r in _run_chunk(c)]


def run(profile: str, harness_dir: Path, data: str, quick: bool, seeds: int, workers: int) -> dict:
    """Per-tag [correct, images], generator-seconds and wall seconds of one harness on GenEval
    (an image is correct when every constraint passed)."""
    from evoharness.evidence import EvidenceStatus
    from evoharness.tasks.builders import build_geneval
    from evoharness.tasks.geneval_score import task_tag

    tasks = build_geneval(data)
    jobs = [(i, s) for i in select(tasks, quick) for s in range(seeds)]
    t0 = time.perf_counter()
    results = run_harness(profile, harness_dir, tasks, jobs, workers)
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for ti, _seed, statuses, _sec in results:
        t = tally[task_tag(tasks[ti])]
        t[0] += int(all(s == EvidenceStatus.passed for s in statuses))
        t[1] += 1
    return {
        "tally": dict(tally),
        "gen_seconds": sum(r[3] for r in results) / max(1, len(results)),
        "seconds": time.perf_counter() - t0,
        "images": len(jobs),
    }


def report(profile: str, results: dict[str, dict]) -> list[str]:
    """Markdown table lines for one profile: harness name → ``run`` result."""
    from evoharness.trace.aggregate import wilson_interval

    names = list(results)

    def cell(k: int, n: int) -> str:
        lo, hi = wilson_interval(k, n)
        return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"

    head = " | ".join(names)
    lines = [
        f"{profile}: "
        + ", ".join(
            f"{h} {r['images']} tasks in {r['seconds']:.0f} s, "
            f"{r['gen_seconds']:.2f} generator-s/task"
            for h, r in results.items()
        ),
        f"| tag | {head} | Δ ({names[-1]} − {names[0]}) | n |",
        "|---" * (len(names) + 3) + "|",
    ]
    means: dict[str, list[float]] = defaultdict(list)
    for tag in TAGS:
        row = []
        for h in names:
            k, n = results[h]["tally"].get(tag, [0, 0])
            row.append(cell(k, n) if n else "-")
            means[h].append(k / n if n else float("nan"))
        n = results[names[0]]["tally"].get(tag, [0, 0])[1]
        lines.append(
            f"| {tag} | {' | '.join(row)} | {means[names[-1]][-1] - means[names[0]][-1]:+.3f} | {n} |"
        )
    row = []
    for h in names:
        k = sum(v[0] for v in results[h]["tally"].values())
        n = sum(v[1] for v in results[h]["tally"].values())
        lo, hi = wilson_interval(k, n)
        row.append(f"{sum(means[h]) / len(means[h]):.3f} (images {k / n:.3f} [{lo:.3f}, {hi:.3f}])")
    d = sum(means[names[-1]]) / len(TAGS) - sum(means[names[0]]) / len(TAGS)
    lines.append(f"| overall | {' | '.join(row)} | {d:+.3f} | |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", choices=sorted(TARGETS), help="(repeatable)")
    ap.add_argument("--harness", action="append", type=Path, help="harness dirs (repeatable)")
    ap.add_argument("--quick", action="store_true", help="first 24 prompts of each tag")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (default 2)")
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="GenEval evaluation_metadata.jsonl")
    a = ap.parse_args(argv)
    harnesses = a.harness or list(HARNESSES)
    for profile in a.profile or list(TARGETS):
        res = {h.name: run(profile, h, a.data, a.quick, a.seeds, a.workers) for h in harnesses}
        print("\n".join(report(profile, res)), flush=True)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
