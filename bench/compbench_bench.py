"""Baseline vs reference harness on T2I-CompBench training prompts, scored officially from
the hand-written constraints (issue 19).

Tasks: the hand-checked rows of ``bench/extract/fixture.jsonl`` and ``holdout.jsonl`` (35 + 4
prompts from each of T2I-CompBench's eight training files — color, shape, texture, spatial,
3d_spatial, non_spatial, numeracy, complex — and, with ``--parti``, the 176 PartiPrompts
rows; conventions in ``bench/extract/README.md``). ``fixture_task`` turns a row into a
``Task`` whose constraints are the row's atoms the embedded world can check
(``bench/extract_bench.py``'s ``gold_atoms`` and ``checkable``, relations from
``evoharness.tasks.models.RELATIONS``):

- objects of one world class → one ``object`` constraint (one object of count 1) or an
  exact ``count`` (the annotated counts summed; ``many`` = at least 2, no maximum);
- ``color`` (GenEval's ten colours), ``attribute`` (the world's textures and shapes, by
  canonical name: ``metal`` → ``metallic``, ``spherical`` → ``round``), ``position``
  (subject class, relation, other class), ``negative`` and ``text``. A colour, attribute or
  relation of a counted object must hold for that many of its boxes (``min_count``, the
  inspector's top-k rule).

Atoms the world cannot check are not constraints, and are counted per category and kind
(never dropped silently): a noun with no world class, a colour outside GenEval's ten, an
attribute that is no world texture or shape, a relation outside ``RELATIONS`` (``on``,
``in``), and atoms the per-class constraint format cannot bind to one instance — two
colours (or two textures, two shapes) on one object, a relation between two objects of one
class, a negation of a class also required, and a colour (texture, shape) of a class two
annotated objects share when it is the class's only one (judged on the top-ranked box alone).
Two or more colours (textures, shapes) of a shared class ("a red car and a blue car") are
checked: the inspector judges them on distinct instances (``SimInspector.judge_all``), each
with its object's count as ``min_count``.

Scoring: ``reference_bench.run_harness`` (the harness through ``HarnessRuntime`` on
``SimGenerator`` with the profile; the harness reads the prompt only, never these
constraints; the exact inspector ``SimInspector`` judges the selected image against them).
Per category: **prompt accuracy** (an image passes when every constraint's verdict is
``pass``; an ``uncertain`` verdict is not a pass) and **constraint accuracy**, each with its
Wilson 95% interval (``evoharness.trace.aggregate.wilson_interval``); ``uncertain`` verdicts
are counted apart. A prompt with no checkable constraint is not scored (it would pass
vacuously) and is counted. Relations the inspector does not check yet (it answers
``uncertain``) count against a prompt; the script needs no change when it checks them.

Usage::

    python bench/compbench_bench.py [--profile NAME ...] [--seeds 2] [--workers 1] [--parti]
        [--harness DIR ...] [--out PREFIX]

``--out PREFIX`` also writes ``PREFIX-<profile>.txt`` and ``.json``. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from calibration_bench import TARGETS  # noqa: E402
from extract.sample import T2I_CATEGORIES  # noqa: E402
from extract_bench import KINDS, _value, checkable, gold_atoms, load, noun_class  # noqa: E402
from reference_bench import HARNESSES, run_harness  # noqa: E402

from evoharness.evidence import EvidenceStatus  # noqa: E402
from evoharness.tasks.models import Constraint, ConstraintType, Task  # noqa: E402
from evoharness.trace.aggregate import wilson_interval  # noqa: E402
from evoharness.vocab import COLORS, SHAPES, TEXTURES  # noqa: E402

FIXTURES = (
    ROOT / "bench" / "extract" / "fixture.jsonl",
    ROOT / "bench" / "extract" / "holdout.jsonl",
)
#: T2I-CompBench's eight categories, in the order the fixture sample draws them.
CATEGORIES = T2I_CATEGORIES
PARTI = "partiprompts"
PASS, UNCERTAIN = EvidenceStatus.passed.value, EvidenceStatus.uncertain.value


def row_category(row: dict[str, Any]) -> str:
    """The T2I-CompBench category of a fixture row, or ``partiprompts`` for a Parti row."""
    return row["category"] if row["source"].startswith("t2icompbench/") else PARTI


def fixture_task(row: dict[str, Any]) -> tuple[Task, dict[str, list[int]]]:
    """A fixture row as a ``Task`` with its checkable constraints (module docstring), and its
    coverage: atom kind (``extract_bench.KINDS``) → ``[checkable atoms, atoms]``.

    The task id is the row's ``id``, its family ``t2icompbench/<category>`` (or
    ``partiprompts``), metadata ``source``, ``line``, ``category``. Raises ``KeyError`` for a
    row without the fixture's fields (``extract_bench.load`` validates rows first)."""
    cov: dict[str, list[int]] = {k: [0, 0] for k in KINDS}
    by_class: dict[str, list[dict[str, Any]]] = defaultdict(list)
    cls_of_noun: dict[str, str] = {}
    for o in row["objects"]:
        cls = noun_class(o["noun"])
        if cls is not None:
            by_class[cls].append(o)
            cls_of_noun[o["noun"]] = cls
    shared = {cls for cls, objs in by_class.items() if len(objs) > 1}

    def k_of(o: dict[str, Any]) -> int:
        """How many boxes an object's colour/attribute/relation must hold for (top-k)."""
        return 2 if o["count"] == "many" else int(o["count"])

    def group(kind: str, value: str) -> str:
        """The property an atom's value is of: colour, texture or shape."""
        return "colour" if kind == "colour" else "texture" if value in TEXTURES else "shape"

    def repeated(o: dict[str, Any], kind: str, value: str) -> bool:
        """Two checkable values of one group (colour; texture; shape) on one object."""
        if kind == "colour":
            return len([c for c in o["colors"] if c in COLORS]) > 1
        g = group(kind, value)
        return (
            len(
                [
                    a
                    for a in o["attributes"]
                    if _value("attribute", a) in (TEXTURES if g == "texture" else SHAPES)
                ]
            )
            > 1
        )

    # each atom with the annotated object it is about (None: relations, negations, texts)
    empty = {"objects": [], "relations": [], "negations": [], "texts": []}
    owned: list[tuple[Any, dict[str, Any] | None]] = [
        (a, o) for o in row["objects"] for a in gold_atoms({**empty, "objects": [o]})
    ]
    owned += [(a, None) for a in gold_atoms({**row, "objects": []})]

    def bindable(a: Any, o: dict[str, Any] | None) -> bool:
        """A colour/attribute atom the inspector can bind to its own instance(s): not a second
        value of one group on one object, and on a class several objects share only when
        that class gets two or more values of the group (distinct instances, step 10 of
        ``evoharness.sim.inspector``; one would be judged on the top-ranked box alone)."""
        assert o is not None
        cls, value = cls_of_noun[o["noun"]], _value(a.kind, a.value)
        if repeated(o, a.kind, value):
            return False
        if cls not in shared:
            return True
        g = group(a.kind, value)
        return (
            sum(
                1
                for b, p in owned
                if p is not None
                and b.kind in ("colour", "attribute")
                and cls_of_noun.get(p["noun"]) == cls
                and checkable(b)
                and group(b.kind, _value(b.kind, b.value)) == g
                and not repeated(p, b.kind, _value(b.kind, b.value))
            )
            > 1
        )

    texts = iter(row["texts"])  # as written (gold_atoms case-folds them); always checkable
    constraints: list[dict[str, Any]] = []
    for cls, objs in by_class.items():
        counts = [o["count"] for o in objs]
        if counts == [1]:
            constraints.append({"type": ConstraintType.object, "subject": cls})
        else:
            lo = sum(2 if c == "many" else int(c) for c in counts)
            hi = None if "many" in counts else lo
            constraints.append(
                {"type": ConstraintType.count, "subject": cls, "min_count": lo, "max_count": hi}
            )
    for a, owner in owned:
        ok = checkable(a)
        classes = [noun_class(n) for n in a.nouns]
        if ok and a.kind in ("colour", "attribute"):
            ok = bindable(a, owner)
        elif ok and a.kind == "relation":
            ok = classes[0] != classes[1] and not shared & set(classes)
        elif ok and a.kind == "negation":
            ok = classes[0] not in by_class
        cov[a.kind][1] += 1
        cov[a.kind][0] += int(ok)
        if not ok or a.kind in ("object", "count"):
            continue
        cls = classes[0] if classes else None
        if owner is not None:
            k = k_of(owner)
        elif cls in by_class and cls not in shared:
            k = k_of(by_class[cls][0])
        else:
            k = 1
        extra = {"min_count": k} if k > 1 else {}
        if a.kind == "colour":
            constraints.append(
                {"type": ConstraintType.color, "subject": cls, "value": a.value, **extra}
            )
        elif a.kind == "attribute":
            constraints.append(
                {
                    "type": ConstraintType.attribute,
                    "subject": cls,
                    "value": _value("attribute", a.value),
                    **extra,
                }
            )
        elif a.kind == "relation":
            constraints.append(
                {
                    "type": ConstraintType.position,
                    "subject": cls,
                    "relation": a.value,
                    "value": classes[1],
                    **extra,
                }
            )
        elif a.kind == "negation":
            constraints.append({"type": ConstraintType.negative, "subject": cls})
        elif a.kind == "text":
            constraints.append(
                {"type": ConstraintType.text, "subject": "text", "value": next(texts)}
            )
    cat = row_category(row)
    task = Task(
        task_id=row["id"],
        prompt=row["prompt"],
        task_family=PARTI if cat == PARTI else f"t2icompbench/{cat}",
        constraints=[Constraint(constraint_id=f"c{i}", **c) for i, c in enumerate(constraints)],
        metadata={"source": row["source"], "line": row["line"], "category": cat},
    )
    return task, cov


def build(fixtures: tuple[Path, ...] = FIXTURES, parti: bool = False) -> tuple[list[Task], dict]:
    """Tasks of every T2I-CompBench row (and Parti rows when ``parti``) of ``fixtures``, and
    the coverage per category: ``{category: {kind: [checkable, atoms]}}``."""
    tasks, coverage = [], {}
    for path in fixtures:
        for row in load(path):
            cat = row_category(row)
            if cat == PARTI and not parti:
                continue
            task, cov = fixture_task(row)
            tasks.append(task)
            per = coverage.setdefault(cat, {k: [0, 0] for k in KINDS})
            for kind, (k, n) in cov.items():
                per[kind][0] += k
                per[kind][1] += n
    return tasks, coverage


def score(tasks: list[Task], results: list[tuple[int, int, tuple[str, ...], float]]) -> dict:
    """Per category (and ``all``: the T2I-CompBench categories, Parti apart): ``images`` scored, ``prompt_pass`` (every verdict
    ``pass``), ``constraints``, ``constraint_pass``, ``uncertain`` verdicts,
    ``images_uncertain`` (with ≥ 1 uncertain verdict) and ``unscored`` images (tasks with no
    constraint, not counted as passes), from ``reference_bench.run_harness``'s results."""
    keys = ("images", "prompt_pass", "constraints", "constraint_pass", "uncertain")
    out: dict[str, dict[str, int]] = {}
    for ti, _seed, statuses, _sec in results:
        cat = tasks[ti].metadata["category"]
        for c in (cat, "all") if cat != PARTI else (cat,):
            t = out.setdefault(c, dict.fromkeys((*keys, "images_uncertain", "unscored"), 0))
            if not statuses:
                t["unscored"] += 1
                continue
            t["images"] += 1
            t["prompt_pass"] += int(all(s == PASS for s in statuses))
            t["constraints"] += len(statuses)
            t["constraint_pass"] += sum(s == PASS for s in statuses)
            t["uncertain"] += sum(s == UNCERTAIN for s in statuses)
            t["images_uncertain"] += int(UNCERTAIN in statuses)
    return out


def cell(k: int, n: int) -> str:
    """``k/n [lo, hi]`` as a rate with its Wilson 95% interval, ``-`` when ``n`` is 0."""
    if not n:
        return "-"
    lo, hi = wilson_interval(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def report(
    profile: str, tasks: list[Task], coverage: dict, results: dict[str, dict[str, Any]]
) -> list[str]:
    """Markdown lines for one profile: the prompt-accuracy table (coverage, prompts with a
    checkable constraint, each harness), the constraint-accuracy table with uncertain counts,
    and coverage per atom kind. ``all`` = the T2I-CompBench categories (Parti apart)."""
    names = list(results)
    cats = [c for c in (*CATEGORIES, PARTI) if c in coverage] + ["all"]
    t2i = [c for c in coverage if c != PARTI]
    cov_all = {k: [sum(coverage[c][k][i] for c in t2i) for i in (0, 1)] for k in KINDS}
    cov = {**coverage, "all": cov_all}
    prompts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in tasks:
        cat = t.metadata["category"]
        for c in (cat, "all") if cat != PARTI else (cat,):
            prompts[c][0] += int(bool(t.constraints))
            prompts[c][1] += 1

    def share(c: str) -> str:
        k = sum(v[0] for v in cov[c].values())
        n = sum(v[1] for v in cov[c].values())
        return f"{k}/{n} ({k / n:.0%})" if n else "-"

    lines = [
        f"{profile}: "
        + ", ".join(
            f"{h} {r['n_images']} images in {r['seconds']:.0f} s, "
            f"{r['gen_seconds']:.2f} generator-s/task"
            for h, r in results.items()
        ),
        "",
        "prompt accuracy (all checkable constraints pass; uncertain is not a pass), Wilson 95%",
        f"| category | checkable atoms | prompts scored | {' | '.join(names)} | images |",
        "|---" * (len(names) + 4) + "|",
    ]
    for c in cats:
        t0 = results[names[0]]["score"].get(c, {})
        row = [
            cell(
                results[h]["score"].get(c, {}).get("prompt_pass", 0),
                results[h]["score"].get(c, {}).get("images", 0),
            )
            for h in names
        ]
        lines.append(
            f"| {c} | {share(c)} | {prompts[c][0]}/{prompts[c][1]} | {' | '.join(row)} "
            f"| {t0.get('images', 0)} |"
        )
    lines += [
        "",
        "constraint accuracy, Wilson 95% (uncertain verdicts / images with one)",
        f"| category | {' | '.join(names)} |",
        "|---" * (len(names) + 1) + "|",
    ]
    for c in cats:
        row = []
        for h in names:
            t = results[h]["score"].get(c, {})
            k, n = t.get("constraint_pass", 0), t.get("constraints", 0)
            row.append(
                f"{cell(k, n)} (n {n}; uncertain {t.get('uncertain', 0)} / {t.get('images_uncertain', 0)})"
            )
        lines.append(f"| {c} | {' | '.join(row)} |")
    lines += [
        "",
        "checkable atoms per kind (checkable/annotated)",
        f"| category | {' | '.join(KINDS)} |",
        "|---" * (len(KINDS) + 1) + "|",
    ]
    for c in cats:
        lines.append(f"| {c} | {' | '.join(f'{k}/{n}' for k, n in cov[c].values())} |")
    return lines


def run_profile(
    profile: str, tasks: list[Task], harnesses: list[Path], seeds: int, workers: int
) -> dict[str, dict[str, Any]]:
    """Harness name → ``score`` result, images, wall seconds and generator-seconds/task for
    every task with a constraint × seeds 0..``seeds``−1 on ``profile``."""
    jobs = [(i, s) for i, t in enumerate(tasks) if t.constraints for s in range(seeds)]
    unscored = [(i, s) for i, t in enumerate(tasks) if not t.constraints for s in range(seeds)]
    out = {}
    for h in harnesses:
        t0 = time.perf_counter()
        res = run_harness(profile, h, tasks, jobs, workers)
        res += [(i, s, (), 0.0) for i, s in unscored]
        out[h.name] = {
            "score": score(tasks, res),
            "n_images": len(jobs),
            "seconds": time.perf_counter() - t0,
            "gen_seconds": sum(r[3] for r in res) / max(1, len(jobs)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument(
        "--profile",
        action="append",
        choices=sorted(TARGETS),
        help="(repeatable; default sdxl-like)",
    )
    ap.add_argument("--harness", action="append", type=Path, help="harness dirs (repeatable)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (default 2)")
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--parti", action="store_true", help="also the PartiPrompts rows")
    ap.add_argument("--out", help="also write OUT-<profile>.txt and .json")
    a = ap.parse_args(argv)
    harnesses = a.harness or list(HARNESSES)
    tasks, coverage = build(parti=a.parti)
    for profile in a.profile or ["sdxl-like"]:
        t0 = time.perf_counter()
        res = run_profile(profile, tasks, harnesses, a.seeds, a.workers)
        lines = report(profile, tasks, coverage, res)
        lines.append(
            f"\nelapsed {time.perf_counter() - t0:.0f} s ({len(tasks)} tasks x {a.seeds} seeds)"
        )
        text = "\n".join(lines)
        print(text, flush=True)
        if a.out:
            head = (
                f"# python bench/compbench_bench.py {' '.join(argv or sys.argv[1:])} "
                f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); official scoring: "
                "exact inspector on the hand-written constraints of bench/extract/*.jsonl\n\n"
            )
            Path(f"{a.out}-{profile}.txt").write_text(head + text + "\n", encoding="utf-8")
            blob = {"profile": profile, "seeds": a.seeds, "coverage": coverage, "harnesses": res}
            Path(f"{a.out}-{profile}.json").write_text(
                json.dumps(blob, indent=2) + "\n", encoding="utf-8"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
