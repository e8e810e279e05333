"""A small finished run, made with the run's own pieces but without Temporal: the run folder
``evolve local`` writes (``params.json``, ``splits/*.jsonl``, ``result.json``, ``store/``),
the executions of two harnesses on the evolution split stored as the round's
``execute_batch`` activity stores them (``execution_record_key``), and the final harness's
executions on the test split stored as ``evolve local`` stores them
(``store_test_records``). Tasks come from the real builders: GenEval and T2I-CompBench from
the shared data, GenEval 2 and WISE from rows in their repositories' formats, and synthetic
tasks (in no benchmark)."""

from __future__ import annotations

import json
from pathlib import Path

from evoharness.harness import harness_id, load_dir
from evoharness.tasks.builders import build_tasks
from evoharness.tasks.io import write_jsonl
from evoharness_app.exports.run import store_test_records
from tests.conftest import SHARED
from workflows.backends import TracePorts, WorkerSection, WorkerSettings
from workflows.store_keys import execution_record_key

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [0, 1]

GENEVAL2_ROWS = [
    {
        "prompt": "four white bicycles in front of three plastic cows",
        "atom_count": 7,
        "vqa_list": [
            ["How many bicycles are in the image?", "four"],
            ["Are the bicycles white?", "Yes"],
            ["How many cows are in the image?", "three"],
        ],
        "skills": ["count", "attribute", "count"],
    },
    {
        "prompt": "a red cup on the left of a green book",
        "atom_count": 4,
        "vqa_list": [["Is there a cup?", "Yes"], ["Is the cup red?", "Yes"]],
        "skills": ["object", "attribute"],
    },
]
WISE_ROWS = [
    {
        "Prompt": "The traditional flower of a Japanese spring festival",
        "Explanation": "Cherry blossoms (sakura), pink flowers on branches",
        "Category": "Cultural common sense",
        "Subcategory": "Festival",
        "prompt_id": 1,
    },
    {
        "Prompt": "What water looks like in a glass below zero degrees Celsius",
        "Explanation": "Ice: solid, clear or white, in a glass",
        "Category": "Natural science",
        "Subcategory": "Physics",
        "prompt_id": 2,
    },
]


def make_run(base: Path, run_id: str = "r1") -> Path:
    """Write the run folder ``base/run_id`` and its store; returns the folder."""
    run = base / run_id
    data = base / "data"
    data.mkdir(parents=True)
    (data / "geneval2.jsonl").write_text("\n".join(json.dumps(r) for r in GENEVAL2_ROWS))
    (data / "wise.json").write_text(json.dumps(WISE_ROWS, indent=2))
    geneval = build_tasks(
        "geneval", SHARED / "data" / "geneval" / "evaluation_metadata.jsonl"
    ).tasks
    compbench = build_tasks(
        "t2icompbench", SHARED / "data" / "t2icompbench" / "color_train.txt"
    ).tasks
    test = [
        *geneval[:3],
        *compbench[:2],
        *build_tasks("geneval2", data / "geneval2.jsonl").tasks,
        *build_tasks("wise", data / "wise.json").tasks,
        *build_tasks("synthetic", seed=0, count=1).tasks,
    ]
    target = geneval[100:106]
    (run / "splits").mkdir(parents=True)
    write_jsonl(test, run / "splits" / "test.jsonl")
    write_jsonl(target, run / "splits" / "target.jsonl")
    (run / "params.json").write_text(json.dumps({"run_id": run_id, "seeds": SEEDS}))
    settings = WorkerSettings(worker=WorkerSection(store="local", local_dir=str(run / "store")))
    ports = TracePorts(settings, "sim", "sim-detector", "rule")
    baseline = load_dir(ROOT / "harnesses" / "baseline")
    final = load_dir(ROOT / "harnesses" / "reference")
    for h in (baseline, final):  # the round's executions, as execute_batch stores them
        for t in target:
            for s in SEEDS:
                e = ports.execute(h, t, s)
                ports.store.put(execution_record_key(run_id, e), e.model_dump_json().encode())
    store_test_records(
        ports.store, run_id, [ports.execute(final, t, s) for t in test for s in SEEDS]
    )
    (run / "result.json").write_text(json.dumps({"best_harness_id": harness_id(final)}))
    return run
