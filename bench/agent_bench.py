"""KScore-style score of knowledge prompts with and without the harness's agent (issue 32).

Each prompt only *refers* to what the image needs (a colour, a count, an object: "a car in
the colour of a London bus"). For each harness (``harnesses/baseline`` and
``harnesses/reference`` by default), runs it as shipped and with the agent tools added
(``search`` on the embedded knowledge base, ``query_knowledge``, ``agent`` with the rule
planner) through ``HarnessRuntime`` on the embedded world (``SimGenerator``, default
profile) for seeds 0..N−1, and scores each image with the exact pixel inspector
(``evoharness.sim.SimInspector``) against the prompt's intended constraints, written by hand
below (what the prompt means: the looked-up colour or count, and none of the thing it only
refers to), mapped onto the rubric by ``evoharness.kscore.kscore_from_evidence``
(faithfulness, visual correctness; no prompt here needs text; aesthetics not measured, so the
overall is the two renormalised: (0.1·f + 0.4·v) / 0.5).

Prints a markdown table (per harness and condition: mean KScore with a 95% bootstrap
interval over images, the all-constraints pass rate) and writes ``--out`` JSON with every
image's scores.

Usage::

    python bench/agent_bench.py [--seeds 16] [--harness DIR ...] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evoharness.harness.io import load_dir  # noqa: E402
from evoharness.harness.patch import apply_patch  # noqa: E402
from evoharness.kscore import kscore_from_evidence  # noqa: E402
from evoharness.runtime.runtime import HarnessRuntime  # noqa: E402
from evoharness.sim import SimGenerator, SimInspector  # noqa: E402
from evoharness.tasks.models import Constraint  # noqa: E402

AGENT_TOOLS = [
    {"name": "facts", "kind": "search", "provider": "embedded"},
    {"name": "know-how", "kind": "query_knowledge"},
    {"name": "agent", "kind": "agent", "backend": "rule"},
]


def _c(i: int, type_: str, subject: str, **kw: object) -> Constraint:
    return Constraint(constraint_id=f"c{i}", type=type_, subject=subject, **kw)


#: prompt → its intended constraints (hand-written).
TASKS: dict[str, list[Constraint]] = {
    "a car in the colour of a London bus": [
        _c(0, "object", "car"),
        _c(1, "color", "car", value="red"),
        _c(2, "negative", "bus"),
    ],
    "a car in the colour of a school bus": [
        _c(0, "object", "car"),
        _c(1, "color", "car", value="yellow"),
        _c(2, "negative", "bus"),
    ],
    "an umbrella in the colour of a flamingo": [
        _c(0, "object", "umbrella"),
        _c(1, "color", "umbrella", value="pink"),
        _c(2, "negative", "flamingo"),
    ],
    "a bench in the colour of grass": [
        _c(0, "object", "bench"),
        _c(1, "color", "bench", value="green"),
    ],
    "a cup in the colour of a banana": [
        _c(0, "object", "cup"),
        _c(1, "color", "cup", value="yellow"),
        _c(2, "negative", "banana"),
    ],
    "a backpack in the colour of a frog": [
        _c(0, "object", "backpack"),
        _c(1, "color", "backpack", value="green"),
        _c(2, "negative", "frog"),
    ],
    "as many apples as a spider has legs": [
        _c(0, "count", "apple", value=8, min_count=8, max_count=8),
        _c(1, "negative", "spider"),
    ],
    "as many cups as there are wheels on a tricycle": [
        _c(0, "count", "cup", value=3, min_count=3, max_count=3)
    ],
}


def with_agent(h):  # type: ignore[no-untyped-def]
    ops = [{"op": "add", "path": "/tools/tools/-", "value": t} for t in AGENT_TOOLS]
    return apply_patch(h, {"responsibility": "tools", "ops": ops})


def bootstrap(x: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean."""
    rng = np.random.default_rng(seed)
    a = np.asarray(x)
    means = a[rng.integers(0, len(a), size=(n, len(a)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--harness", action="append", default=None)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    dirs = a.harness or [
        str(ROOT / "harnesses" / "baseline"),
        str(ROOT / "harnesses" / "reference"),
    ]
    gen, insp = SimGenerator(), SimInspector()
    rows, images = [], []
    t0 = time.time()
    for d in dirs:
        base = load_dir(Path(d))
        for cond, h in (("without agent", base), ("with agent", with_agent(base))):
            rt = HarnessRuntime(h, gen)
            scores, alls = [], []
            for prompt, cs in TASKS.items():
                for seed in range(a.seeds):
                    r = rt.run(prompt, seed)
                    ev = insp.verify(r.image.png, cs, prompt)
                    k = kscore_from_evidence(cs, ev)
                    s = k.overall if k.overall is not None else 0.0
                    scores.append(s)
                    alls.append(all(e.status.value == "pass" for e in ev))
                    images.append(
                        {
                            "harness": Path(d).name,
                            "condition": cond,
                            "prompt": prompt,
                            "seed": seed,
                            "program_prompt": r.program.prompt,
                            "kscore": k.model_dump(),
                            "overall": k.overall,
                            "verdicts": [e.status.value for e in ev],
                        }
                    )
            lo, hi = bootstrap(scores)
            rows.append(
                (
                    Path(d).name,
                    cond,
                    float(np.mean(scores)),
                    lo,
                    hi,
                    float(np.mean(alls)),
                    len(scores),
                )
            )
    print("| harness | condition | KScore (mean) | 95% CI | all constraints pass | images |")
    print("|---|---|---|---|---|---|")
    for name, cond, m, lo, hi, p, n in rows:
        print(f"| {name} | {cond} | {m:.3f} | [{lo:.3f}, {hi:.3f}] | {p:.3f} | {n} |")
    print(f"\n{len(TASKS)} prompts x {a.seeds} seeds; {time.time() - t0:.0f} s")
    if a.out:
        Path(a.out).write_text(json.dumps({"rows": rows, "images": images}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
