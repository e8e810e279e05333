"""Colour and texture binding on multi-object prompts: baseline vs reference harness (issue 30).

A harness whose layout carries colours must not bind them worse than the plain prompt. Per
generator profile (``sdxl-like``, ``flux-like``, ``sd15-like`` by default) and harness, runs
``reference_bench.run_harness`` (the harness through ``HarnessRuntime`` on ``SimGenerator``; the
exact inspector ``SimInspector`` judges the selected image) on four prompt sets, seeds
0..N−1:

- ``geneval-color_attr``: the first ``--n`` of GenEval's ``color_attr`` prompts ("a red bench
  and a green car"), with GenEval's own constraints;
- ``one-colour``: "a <colour> <A> and a <B>" ("a green backpack and a pig": one object
  coloured, the other plain), A, B drawn from GenEval's object names and the colour from its
  ten with ``random.Random(30)``; constraints object A, colour of A, object B;
- ``compbench-color`` / ``compbench-texture``: T2I-CompBench training prompts of the colour
  and texture files from which the rule extractor reads two or more object constraints and at
  least one colour (texture) constraint, the first ``--n`` of a ``random.Random(30)``
  shuffle; the constraints are the extractor's reading (no hand labels: what a label-free run
  would check).

Reported per set: **colour** (texture) constraint accuracy — the share of colour (texture)
constraints whose verdict is ``pass`` — and prompt accuracy (every constraint passes), each
with its Wilson 95% interval (``evoharness.trace.aggregate.wilson_interval``), and the
reference − baseline difference.

Usage::

    python bench/binding_bench.py [--profile NAME ...] [--seeds 2] [--n 60] [--workers 1]
        [--harness DIR ...] [--out FILE]

Exit status 0 always (a benchmark prints).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from reference_bench import HARNESSES, run_harness  # noqa: E402

from evoharness.tasks.models import Constraint, ConstraintType, Task  # noqa: E402
from evoharness.trace.aggregate import wilson_interval  # noqa: E402

DATA = Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared")) / "data"
PROFILES = ("sdxl-like", "flux-like", "sd15-like")
#: the constraint type whose accuracy a set reports
SET_KIND = {
    "geneval-color_attr": ConstraintType.color,
    "one-colour": ConstraintType.color,
    "compbench-color": ConstraintType.color,
    "compbench-texture": ConstraintType.attribute,
}


def geneval_color_attr() -> list[Task]:
    """GenEval's ``color_attr`` tasks (its own constraints)."""
    from evoharness.tasks.builders import build_geneval

    return [
        t
        for t in build_geneval(DATA / "geneval" / "evaluation_metadata.jsonl")
        if t.task_family == "color_attr"
    ]


def one_colour(n: int) -> list[Task]:
    """``n`` prompts "a <colour> <A> and a <B>" (module docstring)."""
    names = [
        w.strip()
        for w in (DATA / "geneval" / "object_names.txt").read_text(encoding="utf-8").splitlines()
        if w.strip() and w.strip() != "person"
    ]
    # GenEval's ten colours, in its order (the draws depend on it)
    colors = "red orange yellow green blue purple pink brown black white".split()
    rng = random.Random(30)
    out = []
    for i in range(n):
        a, b = rng.sample(names, 2)
        col = rng.choice(colors)
        art = "an" if col[0] in "aeiou" else "a"
        art_b = "an" if b[0] in "aeiou" else "a"
        cons = [
            Constraint(constraint_id=f"object:{a}", type=ConstraintType.object, subject=a),
            Constraint(constraint_id=f"color:{a}", type=ConstraintType.color, subject=a, value=col),
            Constraint(constraint_id=f"object:{b}", type=ConstraintType.object, subject=b),
        ]
        prompt = f"{art} {col} {a} and {art_b} {b}"
        out.append(
            Task(
                task_id=f"one-colour-{i:03d}",
                prompt=prompt,
                task_family="one-colour",
                constraints=cons,
            )
        )
    return out


def compbench(file: str, kind: ConstraintType, n: int) -> list[Task]:
    """Up to ``n`` T2I-CompBench prompts of ``file`` read by the rule extractor with two or
    more objects and a ``kind`` constraint (module docstring)."""
    from evoharness.runtime.extract import RuleExtractor

    lines = (DATA / "t2icompbench" / file).read_text(encoding="utf-8").splitlines()
    prompts = list(dict.fromkeys(x.strip() for x in lines if x.strip()))
    random.Random(30).shuffle(prompts)
    ex = RuleExtractor()
    out = []
    for p in prompts:
        cons = ex.extract(p)
        objects = [c for c in cons if c.type in (ConstraintType.object, ConstraintType.count)]
        if len(objects) >= 2 and any(c.type is kind for c in cons):
            out.append(
                Task(task_id=f"{file}-{len(out):03d}", prompt=p, task_family=file, constraints=cons)
            )
        if len(out) == n:
            break
    return out


def prompt_sets(n: int) -> dict[str, list[Task]]:
    """The four prompt sets (module docstring)."""
    return {
        "geneval-color_attr": geneval_color_attr()[:n],
        "one-colour": one_colour(n),
        "compbench-color": compbench("color_train.txt", ConstraintType.color, n),
        "compbench-texture": compbench("texture_train.txt", ConstraintType.attribute, n),
    }


def score(tasks: list[Task], results: list[Any], kind: ConstraintType) -> dict[str, list[int]]:
    """``{"kind": [passed, n], "prompt": [passed, n]}`` over ``results`` of ``run_harness``."""
    k = [0, 0]
    p = [0, 0]
    for ti, _seed, statuses, _sec in results:
        for c, s in zip(tasks[ti].constraints, statuses, strict=True):
            if c.type is kind:
                k[0] += s == "pass"
                k[1] += 1
        p[0] += all(s == "pass" for s in statuses)
        p[1] += 1
    return {"kind": k, "prompt": p}


def _rate(kn: list[int]) -> float:
    return kn[0] / kn[1] if kn[1] else 0.0


def _cell(k: int, n: int) -> str:
    lo, hi = wilson_interval(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]" if n else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", help="(repeatable; default the three)")
    ap.add_argument("--harness", action="append", type=Path, help="harness dirs (repeatable)")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--n", type=int, default=60, help="prompts per generated/sampled set")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, help="also write the figures as JSON here")
    a = ap.parse_args(argv)
    harnesses = a.harness or list(HARNESSES)
    sets = prompt_sets(a.n)
    print(f"# python bench/binding_bench.py {' '.join(argv or sys.argv[1:])}")
    print("sets: " + ", ".join(f"{k} {len(v)} prompts" for k, v in sets.items()))
    figures: dict[str, Any] = {}
    for profile in a.profile or list(PROFILES):
        print(
            f"\n{profile} (seeds 0..{a.seeds - 1}); constraint accuracy of the set's kind | "
            "prompt accuracy, Wilson 95%"
        )
        names = [h.name for h in harnesses]
        print(f"| set | kind | {' | '.join(names)} | Δ kind | Δ prompt |")
        print("|---" * (len(names) + 4) + "|")
        for set_name, tasks in sets.items():
            kind = SET_KIND[set_name]
            jobs = [(i, s) for i in range(len(tasks)) for s in range(a.seeds)]
            res = {}
            for h in harnesses:
                t0 = time.perf_counter()
                res[h.name] = score(tasks, run_harness(profile, h, tasks, jobs, a.workers), kind)
                res[h.name]["seconds"] = round(time.perf_counter() - t0, 1)
            figures.setdefault(profile, {})[set_name] = res
            cells = [f"{_cell(*res[h]['kind'])} \\| {_cell(*res[h]['prompt'])}" for h in names]
            dk = _rate(res[names[-1]]["kind"]) - _rate(res[names[0]]["kind"])
            dp = _rate(res[names[-1]]["prompt"]) - _rate(res[names[0]]["prompt"])
            print(
                f"| {set_name} | {kind.value} | {' | '.join(cells)} | {dk:+.3f} | {dp:+.3f} |",
                flush=True,
            )
    if a.out:
        a.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
