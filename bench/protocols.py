"""Search protocols compared (issue 31): TRACE, AutoRef-style beam, blind random search and
best-of-N, on the same splits, seeds, generator profile and verifier.

For each split seed (``evoharness.tasks.splits.prepare_splits`` over GenEval's prompts, with
an untouched test split):

1. ``trace``: TRACE's in-process beam (``evoharness.trace.beam.run_beam``; target, held-out
   and preservation splits; ``--iterations`` rounds, beam ``--beam``);
2. ``autoref``: ``evoharness.search.protocols`` with feedback = the target split, selection =
   held-out + preservation (the tasks TRACE's gate reads), K ``--candidates``, B ``--beam``,
   T ``--iterations``; the feedback-guided mutation proposer;
3. ``random`` and ``best_of_n``: the same splits, each with a budget of autoref's generator
   calls on that split seed (matched budget).

Every protocol runs on its own empty execution store (cache hits inside a protocol are its
own; none is carried between protocols). After every iteration (round), the best harness so
far is scored on the untouched test split with the official scorer
(``evoharness_app.official``: the exact inspector, GenEval's rules; GenEval overall), on a
store of its own: test executions are not counted in any budget.

Prints a table (final official test score per protocol, mean and range over split seeds;
generator calls spent; calls to reach ``--reach`` of the best final score on the same split
seed) and writes a PNG (test score against cumulative generator calls, one line per protocol,
mean and min–max band over split seeds, step-interpolated, drawn up to the calls every
split seed's run reached) and a JSON of every point to
``--out`` (default ``bench/results/protocols-<UTC date>-<profile>``).

Run: ``.venv/bin/python bench/protocols.py [--profile sdxl-like] [--split-seeds 0 1]
[--sizes 12,4,4,12] [--seeds 2] [--iterations 3] [--candidates 4] [--beam 2]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench.faults.run import ports_for  # noqa: E402
from evoharness.harness.io import harness_id, load_dir  # noqa: E402
from evoharness.harness.schema import Harness  # noqa: E402
from evoharness.search.protocols import SearchConfig, SearchPorts, run_search  # noqa: E402
from evoharness.tasks.builders import build_geneval  # noqa: E402
from evoharness.tasks.io import load_tasks, write_jsonl  # noqa: E402
from evoharness.tasks.models import Task  # noqa: E402
from evoharness.tasks.split_prepare import prepare_splits  # noqa: E402
from evoharness.trace.beam import run_beam  # noqa: E402
from evoharness.trace.round import RoundConfig  # noqa: E402
from evoharness.trace.run_budget import RunBudget, SpendBudget  # noqa: E402

PROTOCOLS = ("trace", "autoref", "random", "best_of_n")
#: First seed of the test split's images (never a search seed).
TEST_SEED = 100_000

Point = dict[str, Any]  # {"iteration", "calls", "cache_hits", "harness_id"}


def make_splits(shared: Path, out: Path, sizes: Sequence[int], seed: int) -> dict[str, list[Task]]:
    """GenEval's prompts dealt into target/heldout/preservation/test by ``prepare_splits``
    (split seed ``seed``; its manifest beside the files in ``out``)."""
    src = out / "geneval.jsonl"
    if not src.exists():
        write_jsonl(build_geneval(shared / "data/geneval/evaluation_metadata.jsonl"), src)
    d = out / f"split-{seed}"
    prepare_splits([src], d, sizes, seed=seed)
    return {s: load_tasks(d / f"{s}.jsonl") for s in ("target", "heldout", "preservation", "test")}


def run_trace(ports: Any, start: Harness, splits: dict[str, list[Task]], a: Any) -> list[Point]:
    """TRACE's beam; a point at the start (0 calls) and after each round (its report's
    generator calls, every probe included, summed) with the frontier's head."""
    cfg = RoundConfig(run_id="protocols-trace", seeds=list(range(a.seeds)), concurrency=1)
    evo = {k: splits[k] for k in ("target", "heldout", "preservation")}
    run = run_beam(
        ports.round_ports(), start, evo, cfg, RunBudget(max_rounds=a.iterations), beam=a.beam
    )
    points = [{"iteration": 0, "calls": 0.0, "cache_hits": 0.0, "harness_id": harness_id(start)}]
    calls = hits = 0.0
    docs = {harness_id(start): start.to_document()}
    for br in run.rounds:
        for r in br.results:
            calls += r.report.cost.get("generator_calls", 0.0)
            hits += r.report.cost.get("cache_hits", 0.0)
        head = br.frontier.head
        docs[head.harness_id] = head.document
        points.append(
            {
                "iteration": br.round,
                "calls": calls,
                "cache_hits": hits,
                "harness_id": head.harness_id,
            }
        )
    return [dict(p, document=docs[p["harness_id"]]) for p in points]


def run_protocol(
    name: str,
    ports: Any,
    start: Harness,
    splits: dict[str, list[Task]],
    a: Any,
    budget: float | None,
) -> list[Point]:
    """``autoref``/``random``/``best_of_n`` (``evoharness.search.protocols``)."""
    cfg = SearchConfig(
        protocol=name,
        candidates=a.candidates,
        beam=a.beam,
        iterations=a.iterations if name == "autoref" else a.iterations * 4,
        seeds=tuple(range(a.seeds)),
        budget=SpendBudget(budget_generator_calls=None if budget is None else int(budget)),
        proposer_seed=a.proposer_seed,
        concurrency=1,
    )
    rp = ports.round_ports()
    run = run_search(
        cfg,
        SearchPorts(rp.execute, rp.compile_program, rp.capabilities),
        start,
        splits["target"],
        [*splits["heldout"], *splits["preservation"]],
    )
    return [
        {
            "iteration": p.iteration,
            "calls": p.generator_calls,
            "cache_hits": p.cache_hits,
            "harness_id": p.best_harness_id,
            "document": run.harnesses[p.best_harness_id],
        }
        for p in run.points
    ]


class TestScorer:
    """Official GenEval overall of a harness on the test split (``TEST_SEED``.. seeds), on
    its own store; memoised by harness id."""

    def __init__(self, profile: str, store: str, tasks: list[Task], seeds: int) -> None:
        from evoharness_app.official import exact_inspector

        self.ports, _ = ports_for(profile, store)
        self.tasks = tasks
        self.seeds = tuple(TEST_SEED + i for i in range(seeds))
        self.scorer = exact_inspector()
        self.memo: dict[str, float] = {}

    def __call__(self, document: dict[str, Any]) -> float:
        h = Harness.model_validate(document)
        hid = harness_id(h)
        if hid not in self.memo:
            from evoharness_app.evaluation import evaluate_harness, score_officially, score_split

            runs = evaluate_harness(
                self.ports, h, {"test": self.tasks}, self.seeds, concurrency=1, progress=_noop
            )
            off = score_officially(
                self.ports.store,
                {"test": self.tasks},
                runs,
                self.scorer,
                concurrency=1,
                progress=_noop,
            )
            self.memo[hid] = float(score_split(self.tasks, off["test"]).geneval["overall"])
        return self.memo[hid]


def _noop(k: int) -> None:
    return None


def calls_to_reach(points: list[Point], target: float) -> float | None:
    """Generator calls at the first point whose test score reaches ``target`` (None: never)."""
    return next((p["calls"] for p in points if p["test"] >= target - 1e-12), None)


def band(curves: list[list[Point]], grid: np.ndarray) -> np.ndarray:
    """``(len(curves), len(grid))``: each curve's test score as a step function of calls
    (the last point at or before each grid value; NaN past its last point)."""
    out = np.full((len(curves), len(grid)), np.nan)
    for i, pts in enumerate(curves):
        xs = np.array([p["calls"] for p in pts])
        ys = np.array([p["test"] for p in pts])
        idx = np.searchsorted(xs, grid, side="right") - 1
        ok = (idx >= 0) & (grid <= xs[-1])
        out[i, ok] = ys[idx[ok]]
    return out


def plot(results: dict[str, list[list[Point]]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    top = max(p["calls"] for runs in results.values() for pts in runs for p in pts)
    grid = np.linspace(0, top, 400)
    for name, runs in results.items():
        b = band(runs, grid)
        have = ~np.any(np.isnan(b), axis=0)  # where every split seed's curve has a point
        mean = np.nanmean(b[:, have], axis=0)
        (line,) = ax.plot(grid[have], mean, label=f"{name} (n={len(runs)})", drawstyle="steps-post")
        ax.fill_between(
            grid[have],
            np.nanmin(b[:, have], axis=0),
            np.nanmax(b[:, have], axis=0),
            step="post",
            alpha=0.15,
            color=line.get_color(),
        )
    ax.set_xlabel("cumulative generator calls (search; test split not counted)")
    ax.set_ylabel("official GenEval overall, untouched test split")
    ax.set_title(title.replace("; ", "\n", 1), fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="sdxl-like")
    ap.add_argument("--split-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sizes", default="12,4,4,12", help="target,heldout,preservation,test")
    ap.add_argument("--seeds", type=int, default=2, help="matched seeds per task")
    ap.add_argument("--test-seeds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=3, help="T (TRACE rounds, autoref)")
    ap.add_argument("--candidates", type=int, default=4, help="K")
    ap.add_argument("--beam", type=int, default=2, help="B")
    ap.add_argument("--proposer-seed", type=int, default=0)
    ap.add_argument("--reach", type=float, default=0.95, help="share of the best final score")
    ap.add_argument("--protocols", nargs="+", default=list(PROTOCOLS), choices=PROTOCOLS)
    ap.add_argument("--harness", default=str(ROOT / "harnesses/baseline"))
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    import os

    shared = Path(os.environ.get("EVOHARNESS_SHARED", a.shared))
    sizes = [int(x) for x in a.sizes.split(",")]
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    out = Path(a.out or ROOT / f"bench/results/protocols-{date}-{a.profile}")
    start = load_dir(a.harness)
    results: dict[str, list[list[Point]]] = {p: [] for p in a.protocols}
    timing: dict[str, list[float]] = {p: [] for p in a.protocols}
    with tempfile.TemporaryDirectory(prefix="protocols-") as tmp:
        for ss in a.split_seeds:
            splits = make_splits(shared, Path(tmp), sizes, ss)
            test = TestScorer(a.profile, f"{tmp}/test-{ss}", splits["test"], a.test_seeds)
            budget: float | None = None
            for name in a.protocols:
                t0 = time.perf_counter()
                ports, _ = ports_for(a.profile, f"{tmp}/{name}-{ss}")
                if name == "trace":
                    pts = run_trace(ports, start, splits, a)
                else:
                    pts = run_protocol(
                        name, ports, start, splits, a, None if name == "autoref" else budget
                    )
                if name == "autoref":
                    budget = pts[-1]["calls"]
                for p in pts:
                    p["test"] = test(p.pop("document"))
                results[name].append(pts)
                timing[name].append(time.perf_counter() - t0)
                print(
                    f"split seed {ss} {name}: {len(pts) - 1} iterations, "
                    f"{pts[-1]['calls']:.0f} calls, test {pts[0]['test']:.3f} -> "
                    f"{pts[-1]['test']:.3f} ({timing[name][-1]:.0f} s)",
                    flush=True,
                )
    report(results, a, out, timing)
    return 0


def report(
    results: dict[str, list[list[Point]]], a: Any, out: Path, timing: dict[str, list[float]]
) -> None:
    """The table on stdout; ``out``.png and ``out``.json."""
    n = len(a.split_seeds)
    best = [max(results[p][i][-1]["test"] for p in results) for i in range(n)]
    lines = [
        f"protocols on {a.profile}: split seeds {a.split_seeds}, sizes {a.sizes}, "
        f"{a.seeds} seeds, T={a.iterations} K={a.candidates} B={a.beam}; "
        f"test: official GenEval overall, {a.test_seeds} seeds",
        f"{'protocol':<10} {'test before':>11} {'test final (min..max)':>24} "
        f"{'calls':>8} {'hits':>6} {f'calls to {a.reach:.0%} of best':>20} {'wall s':>7}",
    ]
    for name, runs in results.items():
        final = [r[-1]["test"] for r in runs]
        reach = [calls_to_reach(r, a.reach * best[i]) for i, r in enumerate(runs)]
        got = [c for c in reach if c is not None]
        reach_s = f"{np.mean(got):.0f} ({len(got)}/{n})" if got else f"never (0/{n})"
        lines.append(
            f"{name:<10} {np.mean([r[0]['test'] for r in runs]):>11.3f} "
            f"{np.mean(final):>9.3f} ({min(final):.3f}..{max(final):.3f}) "
            f"{np.mean([r[-1]['calls'] for r in runs]):>8.0f} "
            f"{np.mean([r[-1]['cache_hits'] for r in runs]):>6.0f} {reach_s:>20} "
            f"{np.mean(timing[name]):>7.0f}"
        )
    text = "\n".join(lines)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(results, out.with_suffix(".png"), lines[0])
    cmd = "python bench/protocols.py " + " ".join(sys.argv[1:])
    out.with_suffix(".txt").write_text(f"$ {cmd}\n{text}\n")
    out.with_suffix(".json").write_text(
        json.dumps({"command": cmd, "args": vars(a), "results": results}, indent=1)
    )
    print(f"wrote {out.with_suffix('.png')}, .txt and .json")


if __name__ == "__main__":
    raise SystemExit(main())
