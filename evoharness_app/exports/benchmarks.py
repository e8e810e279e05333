"""``evoharness export-eval``: a run's test-split images in the layout each benchmark's own
scoring code reads.

One writer per benchmark; each takes the tasks of the run's split that came from that
benchmark (``Task.metadata["source"]``, set by ``evoharness.tasks.builders``) and the
stored executions of one harness on them (``exports.run.RunFolder``):

- ``geneval`` (djghosh13/geneval, ``evaluation/evaluate_images.py``, ``main``):
  ``<out>/<NNNNN>/metadata.jsonl`` (one JSON object, the prompt's row of
  ``evaluation_metadata.jsonl``: ``tag``, ``include``, ``exclude``, ``prompt``; read with
  ``json.load``) and ``<out>/<NNNNN>/samples/<SSSS>.png`` (``\\d+\\.png``), ``NNNNN`` the
  row's 0-based index in ``evaluation_metadata.jsonl`` (what GenEval's ``generation``
  script names the folder), one sample per seed. The row is re-read from the benchmark file
  (``--source``: the folder holding ``geneval/<file>``; default ``$EVOHARNESS_SHARED/data``).
- ``geneval2`` (facebookresearch/GenEval2, ``README.md`` "Image Generation" / "Evaluation",
  ``evaluation.py --benchmark_data --image_filepath_data``): ``<out>/image_paths.json``, a
  JSON object prompt → image file path (absolute), ``<out>/geneval2_data.jsonl``
  (``prompt``, ``atom_count``, ``vqa_list`` [[question, answer]], ``skills``, from the task)
  and ``<out>/images/<n>.png``; one image per prompt (``seed``).
- ``t2icompbench`` (Karine-Huang/T2I-CompBench, ``BLIPvqa_eval/BLIP_vqa.py``,
  ``Create_annotation_for_BLIP``): ``<out>/<category>/samples/<prompt>_<NNNNNN>.png``; the
  scorer takes the prompt as ``file_name.split("_")[0]`` and sorts by the number after the
  last ``_``; run it with ``--out_dir <out>/<category>``. One image per seed.
- ``wise`` (PKU-YuanGroup/WISE, ``gpt_eval.py``, ``load_prompts`` / ``main``):
  ``<out>/prompts.json``, a JSON array of ``{prompt_id, Prompt, Explanation, Category,
  Subcategory}`` (``--json_path``) and ``<out>/images/<prompt_id>.png`` (``--image_dir``);
  one image per prompt (``seed``).

Every export writes ``<out>/evoharness-export.json``: the run, harness, split and seeds, and
every (task, seed) as written, missing (no execution record), or failed (no image, an
unreadable image or an error in the execution's trace), with counts, and the split's tasks
from other sources (``not_in_benchmark``). Nothing is skipped silently. Two tasks that would
land on the same file or folder, or a prompt the layout cannot name, stop the export before
anything is written (``ExportCollisionError`` lists them all).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.memory.bundles import PROTOCOL_ERROR_KINDS
from evoharness.tasks.models import Task
from evoharness_app.exports.run import RunFolder

BENCHMARKS = ("geneval", "geneval2", "t2icompbench", "wise")
#: The manifest every export writes at its root.
MANIFEST = "evoharness-export.json"


class ExportError(Exception):
    """An export that cannot be made (bad output folder, unreadable benchmark file...); the
    message names the file or field."""


class ExportCollisionError(ExportError):
    """Tasks that collide under the benchmark's layout (or prompts it cannot name);
    ``problems``: one line per collision, naming the target and the task ids."""

    def __init__(self, benchmark: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            f"{benchmark}: {len(problems)} task(s) collide under the benchmark's layout; "
            "nothing written:\n  " + "\n  ".join(problems)
        )


@dataclass
class ExportResult:
    """What an export wrote. ``written``: (task_id, seed, path relative to ``out``);
    ``missing`` / ``failed``: (task_id, seed, reason); ``not_in_benchmark``: task ids of the
    split that came from another source."""

    benchmark: str
    out: Path
    run_id: str
    harness_id: str
    split: str
    seeds: list[int]
    written: list[tuple[str, int, str]] = field(default_factory=list)
    missing: list[tuple[str, int, str]] = field(default_factory=list)
    failed: list[tuple[str, int, str]] = field(default_factory=list)
    not_in_benchmark: list[str] = field(default_factory=list)

    def to_doc(self) -> dict[str, Any]:
        """The manifest (``evoharness-export.json``) as a JSON-able dict."""

        def rows(xs: list[tuple[str, int, str]], name: str) -> list[dict[str, Any]]:
            return [{"task_id": t, "seed": s, name: v} for t, s, v in xs]

        return {
            "benchmark": self.benchmark,
            "run_id": self.run_id,
            "harness_id": self.harness_id,
            "split": self.split,
            "seeds": self.seeds,
            "counts": {
                "written": len(self.written),
                "missing": len(self.missing),
                "failed": len(self.failed),
                "not_in_benchmark": len(self.not_in_benchmark),
            },
            "written": rows(self.written, "path"),
            "missing": rows(self.missing, "reason"),
            "failed": rows(self.failed, "reason"),
            "not_in_benchmark": self.not_in_benchmark,
        }


def _image(run: RunFolder, harness_id: str, task: Task, seed: int) -> tuple[bytes | None, str]:
    """(PNG bytes, "") for a usable execution, else (None, "missing: ..." / "failed: ...")."""
    ex = run.record(harness_id, task.task_id, seed)
    if ex is None:
        return (
            None,
            f"missing: no execution record at {run.record_key(harness_id, task.task_id, seed)}",
        )
    errors = [e for e in ex.trace if str(e.get("kind", "")) in PROTOCOL_ERROR_KINDS]
    if errors:
        return None, f"failed: {errors[0].get('kind')} in the trace: {errors[0].get('message', '')}"
    if ex.image is None:
        return None, "failed: the execution has no image"
    try:
        data = run.store.get(ex.image.key)
    except KeyError:
        return None, f"failed: image {ex.image.key} is not in the store"
    if not data.startswith(b"\x89PNG"):
        return None, f"failed: image {ex.image.key} is not a PNG"
    return data, ""


@dataclass
class _Slot:
    """One image file to write: the task, the seed and the path under ``out``."""

    task: Task
    seed: int
    path: str


@dataclass
class _Plan:
    slots: list[_Slot]
    files: dict[str, Callable[[dict[tuple[str, int], str]], str]]  # path → text(written)


def _collisions(owner: dict[str, list[str]], what: str) -> list[str]:
    return [
        f"{what} {key!r}: tasks {', '.join(ids)}"
        for key, ids in sorted(owner.items())
        if len(ids) > 1
    ]


def _group(keys: list[tuple[str, str]]) -> dict[str, list[str]]:
    owner: dict[str, list[str]] = {}
    for key, tid in keys:
        owner.setdefault(key, []).append(tid)
    return owner


# ---------------------------------------------------------------------------- GenEval
def _geneval_row(task: Task, source: Path) -> dict[str, Any]:
    meta = task.metadata
    path = source / "geneval" / str(meta.get("file", ""))
    line = meta.get("line")
    if not path.is_file() or not isinstance(line, int):
        raise ExportError(
            f"task {task.task_id}: GenEval row not found ({path}, line {line!r}); give --source "
            "the folder that holds geneval/evaluation_metadata.jsonl"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    if line < 1 or line > len(lines):
        raise ExportError(f"task {task.task_id}: {path} has no line {line}")
    row = json.loads(lines[line - 1])
    if row.get("prompt") != task.prompt:
        raise ExportError(
            f"task {task.task_id}: {path}:{line} is {row.get('prompt')!r}, not the task's prompt "
            f"{task.prompt!r} (another version of the file?)"
        )
    return dict(row)


def _plan_geneval(tasks: list[Task], seeds: list[int], source: Path) -> _Plan:
    folder = {t.task_id: f"{int(t.metadata['line']) - 1:05d}" for t in tasks}
    problems = _collisions(_group([(folder[t.task_id], t.task_id) for t in tasks]), "folder")
    if problems:
        raise ExportCollisionError("geneval", problems)
    rows = {t.task_id: _geneval_row(t, source) for t in tasks}
    slots = [
        _Slot(t, s, f"{folder[t.task_id]}/samples/{i:04d}.png")
        for t in tasks
        for i, s in enumerate(seeds)
    ]
    files = {
        f"{folder[t.task_id]}/metadata.jsonl": _fixed(json.dumps(rows[t.task_id])) for t in tasks
    }
    return _Plan(slots, files)


def _fixed(line: str) -> Callable[[dict[tuple[str, int], str]], str]:
    """A metadata file whose text does not depend on what was written: ``line`` + newline."""

    def text(_written: dict[tuple[str, int], str]) -> str:
        return line + "\n"

    return text


# --------------------------------------------------------------------------- GenEval 2
def _plan_geneval2(tasks: list[Task], seed: int, out: Path) -> _Plan:
    problems = _collisions(_group([(t.prompt, t.task_id) for t in tasks]), "prompt")
    if problems:
        raise ExportCollisionError("geneval2", problems)
    slots = [_Slot(t, seed, f"images/{i:05d}.png") for i, t in enumerate(tasks)]

    def paths(written: dict[tuple[str, int], str]) -> str:
        doc = {
            t.prompt: str((out / written[(t.task_id, seed)]).resolve())
            for t in tasks
            if (t.task_id, seed) in written
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

    def data(_w: dict[tuple[str, int], str]) -> str:
        rows = [
            {
                "prompt": t.prompt,
                "atom_count": t.metadata.get("atom_count"),
                "vqa_list": [[c.subject, c.value] for c in t.constraints],
                "skills": list(t.metadata.get("skills", [])),
            }
            for t in tasks
        ]
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)

    return _Plan(slots, {"image_paths.json": paths, "geneval2_data.jsonl": data})


# ------------------------------------------------------------------------ T2I-CompBench
#: Characters a T2I-CompBench file name cannot hold: ``_`` ends the prompt in the scorer's
#: ``file_name.split("_")[0]``; ``/`` and NUL are not allowed in a file name.
_T2I_FORBIDDEN = ("_", "/", "\0")


def _plan_t2icompbench(tasks: list[Task], seeds: list[int]) -> _Plan:
    problems = [
        f"prompt {t.prompt!r} (task {t.task_id}): contains {c!r}, which the scorer's file-name "
        "parsing cannot carry"
        for t in tasks
        for c in _T2I_FORBIDDEN
        if c in t.prompt
    ]
    problems += [
        f"prompt {t.prompt!r} (task {t.task_id}): {len(t.prompt.encode()) + 11} bytes as a file "
        "name (limit 255)"
        for t in tasks
        if len(t.prompt.encode()) + 11 > 255
    ]
    cats = {t.task_id: t.task_family for t in tasks}
    problems += [
        f"category {c!r} (task {t.task_id}): not a folder name"
        for t in tasks
        if (c := cats[t.task_id]) in ("", ".", "..") or "/" in c
    ]
    if problems:
        raise ExportCollisionError("t2icompbench", problems)
    slots: list[_Slot] = []
    counter: dict[str, int] = {}
    for t in tasks:
        cat = cats[t.task_id]
        for s in seeds:
            n = counter.get(cat, 0)
            counter[cat] = n + 1
            slots.append(_Slot(t, s, f"{cat}/samples/{t.prompt}_{n:06d}.png"))
    return _Plan(slots, {})


# ------------------------------------------------------------------------------- WISE
def _plan_wise(tasks: list[Task], seed: int) -> _Plan:
    pid = {t.task_id: t.metadata.get("prompt_id") for t in tasks}
    bad = [
        f"task {t.task_id}: prompt_id {pid[t.task_id]!r} is not a file name"
        for t in tasks
        if not str(pid[t.task_id]).strip() or "/" in str(pid[t.task_id])
    ]
    problems = bad + _collisions(
        _group([(f"images/{pid[t.task_id]}.png", t.task_id) for t in tasks]), "image"
    )
    if problems:
        raise ExportCollisionError("wise", problems)
    slots = [_Slot(t, seed, f"images/{pid[t.task_id]}.png") for t in tasks]

    def prompts(_w: dict[tuple[str, int], str]) -> str:
        rows = [
            {
                "prompt_id": pid[t.task_id],
                "Prompt": t.prompt,
                "Explanation": t.metadata.get("explanation", ""),
                "Category": t.task_family,
                "Subcategory": t.metadata.get("subcategory", ""),
            }
            for t in tasks
        ]
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"

    return _Plan(slots, {"prompts.json": prompts})


def default_source_dir() -> Path:
    """Where the benchmark files are read from: ``$EVOHARNESS_SHARED/data`` (the folder
    ``evoharness build-tasks`` reads GenEval from)."""
    from evoharness_app.main_job import default_shared_dir

    return default_shared_dir() / "data"


def export_eval(
    run: RunFolder,
    benchmark: str,
    out: str | os.PathLike[str],
    *,
    harness_id: str | None = None,
    split: str = "test",
    seed: int | None = None,
    source_dir: str | os.PathLike[str] | None = None,
) -> ExportResult:
    """Write the images ``run`` produced for ``split`` with ``harness_id`` (default: the
    run's final harness) into ``out`` in ``benchmark``'s layout (see the module docstring).

    ``seed``: the seed whose image is exported where the benchmark takes one image per
    prompt (``geneval2``, ``wise``; default: the run's first seed); ``geneval`` and
    ``t2icompbench`` take every seed of the run. Raises ``ExportError`` for an unknown
    benchmark, a run with no final harness and no ``harness_id``, a seed the run did not
    use, an ``out`` that exists and is not empty, or an unreadable benchmark file;
    ``ExportCollisionError`` (nothing written) when tasks collide under the layout."""
    if benchmark not in BENCHMARKS:
        raise ExportError(f"--dataset {benchmark!r}: expected one of {', '.join(BENCHMARKS)}")
    hid = harness_id or run.final_harness_id
    if not hid:
        raise ExportError(
            f"{run.folder}: the run names no final harness (no summary.json or result.json); "
            "give --harness-id"
        )
    seeds = list(run.seeds)
    one = seeds[0] if seed is None else seed
    if one not in seeds:
        raise ExportError(f"--seed {seed}: the run used seeds {seeds}")
    out_p = Path(out)
    if out_p.exists() and (not out_p.is_dir() or any(out_p.iterdir())):
        raise ExportError(f"--out {out_p}: exists and is not an empty folder")
    all_tasks = run.tasks(split)
    tasks = [t for t in all_tasks if t.metadata.get("source") == benchmark]
    if benchmark == "geneval":
        plan = _plan_geneval(tasks, seeds, Path(source_dir or default_source_dir()))
    elif benchmark == "geneval2":
        plan = _plan_geneval2(tasks, one, out_p)
    elif benchmark == "t2icompbench":
        plan = _plan_t2icompbench(tasks, seeds)
    else:
        plan = _plan_wise(tasks, one)
    result = ExportResult(
        benchmark=benchmark,
        out=out_p,
        run_id=run.run_id,
        harness_id=hid,
        split=split,
        seeds=seeds if benchmark in ("geneval", "t2icompbench") else [one],
        not_in_benchmark=[t.task_id for t in all_tasks if t.metadata.get("source") != benchmark],
    )
    out_p.mkdir(parents=True, exist_ok=True)
    if benchmark == "geneval":  # GenEval's loader lists samples/ of every prompt folder
        for rel in plan.files:
            (out_p / rel).parent.joinpath("samples").mkdir(parents=True, exist_ok=True)
    written: dict[tuple[str, int], str] = {}
    for slot in plan.slots:
        data, why = _image(run, hid, slot.task, slot.seed)
        key = (slot.task.task_id, slot.seed)
        if data is None:
            kind, _, reason = why.partition(": ")
            (result.missing if kind == "missing" else result.failed).append((*key, reason))
            continue
        path = out_p / slot.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written[key] = slot.path
        result.written.append((*key, slot.path))
    for rel, text in plan.files.items():
        path = out_p / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text(written), encoding="utf-8")
    (out_p / MANIFEST).write_text(json.dumps(result.to_doc(), indent=2, ensure_ascii=False) + "\n")
    return result
