"""Baseline vs the hand-tuned reference harness on GenEval, same frozen generator.

Both harnesses run through ``HarnessRuntime`` with the embedded ``SimGenerator``; every final
image is scored against the TASK's constraints by ``SimInspector`` (pixels only). The runtime
itself never sees those constraints (the reference's verify-and-repair checks the constraints
it extracted from the prompt). The difference is the harness alone: proof that the harness,
not the generator, changes the result.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

import pytest

from evoharness.harness import harness_id, load_dir
from evoharness.runtime import HarnessRuntime
from evoharness.tasks.builders import build_geneval

sim = pytest.importorskip("evoharness.sim")
pytest.importorskip("evoharness.sim.inspector")


def _sign_test_p(wins: int, losses: int) -> float:
    """One-sided exact sign test over discordant pairs: P(X >= wins), X ~ Bin(n, 1/2)."""
    n = wins + losses
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n if n else 1.0


def _stratified(tasks, per_family: int):
    by: dict[str, list] = defaultdict(list)
    for t in tasks:
        by[t.task_family].append(t)
    out = []
    for fam in sorted(by):
        rows = by[fam]
        step = max(1, len(rows) // per_family)
        out.extend(rows[::step][:per_family])
    return out


def _compare(repo_root, tasks, seeds):
    gen, insp = sim.SimGenerator(), sim.SimInspector()
    passed: dict[str, list[bool]] = {}
    constraint_rate: dict[str, float] = {}
    calls: dict[str, int] = {}
    for name in ("baseline", "reference"):
        rt = HarnessRuntime(load_dir(repo_root / "harnesses" / name), gen, insp)
        ok, n_pass, n_all, n_calls = [], 0, 0, 0
        t0 = time.perf_counter()
        for task in tasks:
            for seed in seeds:
                res = rt.run_task(task, seed)
                n_calls += len(res.programs)
                ev = insp.verify(res.image.png, task.constraints, task.prompt)
                ok.append(all(e.passed for e in ev))
                n_pass += sum(e.passed for e in ev)
                n_all += len(ev)
        passed[name], constraint_rate[name], calls[name] = ok, n_pass / n_all, n_calls
        print(
            f"{name}: task pass {sum(ok) / len(ok):.3f}, constraint pass "
            f"{n_pass / n_all:.3f}, generations {n_calls} for {len(ok)} requests, "
            f"{time.perf_counter() - t0:.1f}s"
        )
    wins = sum(r and not b for b, r in zip(passed["baseline"], passed["reference"], strict=True))
    losses = sum(b and not r for b, r in zip(passed["baseline"], passed["reference"], strict=True))
    return passed, constraint_rate, wins, losses


def _assert_clearly_higher(passed, constraint_rate, wins, losses):
    base = sum(passed["baseline"]) / len(passed["baseline"])
    ref = sum(passed["reference"]) / len(passed["reference"])
    assert ref >= base + 0.2, (base, ref)
    assert constraint_rate["reference"] > constraint_rate["baseline"] + 0.1
    assert _sign_test_p(wins, losses) < 0.01, (wins, losses)


@pytest.mark.slow  # whole rounds in the embedded world; `make test-all` runs it
def test_reference_beats_baseline_on_geneval_sample(repo_root, shared_dir):
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    sample = _stratified(tasks, per_family=7)  # 6 families → 42 tasks
    assert len({t.task_family for t in sample}) == 6
    _assert_clearly_higher(*_compare(repo_root, sample, seeds=(0, 1)))


@pytest.mark.slow
def test_reference_beats_baseline_on_all_geneval(repo_root, shared_dir):
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    _assert_clearly_higher(*_compare(repo_root, tasks, seeds=(0, 1)))


def test_reference_harness_is_valid_and_uses_every_lever(repo_root):
    ref = load_dir(repo_root / "harnesses" / "reference")
    base = load_dir(repo_root / "harnesses" / "baseline")
    assert harness_id(ref) != harness_id(base)
    kinds = [r.kind for r in ref.policy.rewrites if r.enabled]
    assert {"move_negations", "bind_attributes", "spell_counts", "compress"} <= set(kinds)
    assert [t.kind for t in ref.tools.tools] == ["layout_planner"]
    assert {s.kind for s in ref.middleware.stages} >= {"verify_and_repair"}
    assert any(
        e.kind == "rewrite" and e.value == "quote_text"
        for s in ref.skills.skills
        for e in s.effects
    )
