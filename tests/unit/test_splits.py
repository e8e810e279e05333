"""prepare_splits / verify_splits on the real GenEval + PartiPrompts tasks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evoharness.canonical import sha256_hex
from evoharness.tasks.builders import build_tasks, write_jsonl
from evoharness.tasks.io import load_tasks
from evoharness.tasks.models import Task, normalize_prompt
from evoharness.tasks.splits import (
    SPLITS,
    SplitError,
    prepare_splits,
    scaled_sizes,
    verify_splits,
)


@pytest.fixture(scope="module")
def task_files(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("tasks")
    data = shared_dir / "data"
    g = write_jsonl(
        build_tasks("geneval", data / "geneval" / "evaluation_metadata.jsonl").tasks,
        d / "geneval.jsonl",
    )
    p = write_jsonl(
        build_tasks("partiprompts", data / "partiprompts" / "PartiPrompts.tsv").tasks,
        d / "parti.jsonl",
    )
    return [g, p]


@pytest.fixture(scope="module")
def split_dir(task_files: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("splits")
    prepare_splits(task_files, out, seed=0)
    return out


def test_500_100_100_disjoint_and_labelled(split_dir: Path, task_files: list[Path]) -> None:
    splits = {name: load_tasks(split_dir / f"{name}.jsonl") for name in SPLITS}
    assert [len(splits[n]) for n in SPLITS] == [500, 100, 100]
    ids = [t.task_id for n in SPLITS for t in splits[n]]
    prompts = [normalize_prompt(t.prompt) for n in SPLITS for t in splits[n]]
    assert len(set(ids)) == len(ids) == 700
    assert len(set(prompts)) == 700
    for name in SPLITS:
        assert {t.metadata["split"] for t in splits[name]} == {name}
    # Tasks are copied unchanged apart from metadata.split.
    source = {t.task_id: t for f in task_files for t in load_tasks(f)}
    for t in splits["target"][:50]:
        original = source[t.task_id]
        assert t.model_copy(update={"metadata": original.metadata}) == original


def test_stratified_by_family(split_dir: Path, task_files: list[Path]) -> None:
    everything = [t for f in task_files for t in load_tasks(f)]
    share = {k: v / len(everything) for k, v in Counter(t.task_family for t in everything).items()}
    manifest = json.loads((split_dir / "manifest.json").read_text())
    for name, size in zip(SPLITS, (500, 100, 100), strict=True):
        fams = manifest["splits"][name]["families"]
        for fam, p in share.items():
            # systematic sampling: within one task of the proportional share
            assert abs(fams.get(fam, 0) - p * size) <= 1.0 + 1e-9, (name, fam)


def test_manifest_records_counts_seed_and_hashes(split_dir: Path, task_files: list[Path]) -> None:
    m = json.loads((split_dir / "manifest.json").read_text())
    assert m["seed"] == 0 and m["sizes"] == [500, 100, 100]
    for name in SPLITS:
        entry = m["splits"][name]
        assert entry["sha256"] == sha256_hex((split_dir / entry["file"]).read_bytes())
    assert [e["sha256"] for e in m["inputs"]] == [sha256_hex(f.read_bytes()) for f in task_files]
    assert [e["tasks"] for e in m["inputs"]] == [553, 1631]
    assert verify_splits(split_dir / "manifest.json")["seed"] == 0


def test_seeded_and_reproducible(task_files: list[Path], split_dir: Path, tmp_path: Path) -> None:
    prepare_splits(task_files, tmp_path / "again", seed=0)
    prepare_splits(task_files, tmp_path / "other", seed=1)
    for name in SPLITS:
        same = (tmp_path / "again" / f"{name}.jsonl").read_bytes()
        assert same == (split_dir / f"{name}.jsonl").read_bytes()
    assert (tmp_path / "other" / "target.jsonl").read_bytes() != same


def test_verify_rejects_one_changed_byte(split_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(split_dir, copy)
    # Inputs are referenced relative to the manifest; keep them reachable from the copy.
    m = json.loads((copy / "manifest.json").read_text())
    for e in m["inputs"]:
        e["path"] = str((split_dir / e["path"]).resolve())
    (copy / "manifest.json").write_text(json.dumps(m))
    verify_splits(copy)
    data = bytearray((copy / "heldout.jsonl").read_bytes())
    i = data.index(b'"prompt":"') + len(b'"prompt":"')
    data[i] = ord("A") if data[i] != ord("A") else ord("B")
    (copy / "heldout.jsonl").write_bytes(bytes(data))
    with pytest.raises(SplitError, match=r"heldout\.jsonl: sha256 .* does not match the manifest"):
        verify_splits(copy / "manifest.json")


def test_verify_rejects_a_consistent_but_wrong_split(split_dir: Path, tmp_path: Path) -> None:
    """Swap a task between splits and fix up every hash: the rebuild from inputs catches it."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(split_dir, copy)
    m = json.loads((copy / "manifest.json").read_text())
    for e in m["inputs"]:
        e["path"] = str((split_dir / e["path"]).resolve())
    target = load_tasks(copy / "target.jsonl")
    held = load_tasks(copy / "heldout.jsonl")
    t0, h0 = target[0], held[0]
    target[0] = h0.model_copy(update={"metadata": {**h0.metadata, "split": "target"}})
    held[0] = t0.model_copy(update={"metadata": {**t0.metadata, "split": "heldout"}})
    for name, tasks in (("target", target), ("heldout", held)):
        write_jsonl(tasks, copy / f"{name}.jsonl")
        m["splits"][name]["sha256"] = sha256_hex((copy / f"{name}.jsonl").read_bytes())
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SplitError, match=r"target\.jsonl: does not match the split recomputed"):
        verify_splits(copy)


def test_verify_rejects_changed_input(task_files: list[Path], tmp_path: Path) -> None:
    import shutil

    inputs = [shutil.copy(f, tmp_path / f.name) for f in task_files]
    prepare_splits(inputs, tmp_path / "s")
    with open(inputs[1], "ab") as fh:
        fh.write(b"\n")
    with pytest.raises(SplitError, match=r"parti\.jsonl: input sha256"):
        verify_splits(tmp_path / "s")


@pytest.mark.parametrize(
    ("available", "expected"),
    [(700, (500, 100, 100)), (5000, (500, 100, 100)), (70, (50, 10, 10)), (553, (395, 79, 79))],
)
def test_scaled_sizes(available: int, expected: tuple[int, int, int]) -> None:
    assert scaled_sizes((500, 100, 100), available) == expected
    assert sum(scaled_sizes((500, 100, 100), available)) == min(available, 700)


def test_small_source_shrinks_5_1_1_and_dedups_across_files(tmp_path: Path) -> None:
    a = [
        Task(task_id=f"a/{i}", prompt=f"prompt {i}", task_family="x" if i % 2 else "y")
        for i in range(14)
    ]
    b = [Task(task_id="b/1", prompt="Prompt 3!", task_family="x")]  # duplicate of a/3
    write_jsonl(a, tmp_path / "a.jsonl")
    write_jsonl(b, tmp_path / "b.jsonl")
    m = prepare_splits([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "s", seed=3)
    assert m["sizes"] == [10, 2, 2] and m["dropped_duplicates"] == 1
    assert all(
        t.task_id != "b/1" for n in SPLITS for t in load_tasks(tmp_path / "s" / f"{n}.jsonl")
    )
    verify_splits(tmp_path / "s")


def test_duplicate_task_id_across_files_writes_nothing(tmp_path: Path) -> None:
    t = [Task(task_id="same", prompt="p", task_family="f")]
    write_jsonl(t, tmp_path / "a.jsonl")
    write_jsonl([t[0].model_copy(update={"prompt": "q"})], tmp_path / "b.jsonl")
    with pytest.raises(SplitError, match=r"b\.jsonl: duplicate task_id 'same'"):
        prepare_splits([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_preservation_tasks_carry_a_quality_constraint(
    split_dir: Path, task_files: list[Path], tmp_path: Path
) -> None:
    source = {t.task_id: t for f in task_files for t in load_tasks(f)}
    pres = load_tasks(split_dir / "preservation.jsonl")
    for t in pres:
        *rest, q = t.constraints
        assert (q.constraint_id, q.type.value, q.value) == ("quality", "quality", 0.5)
        assert rest == source[t.task_id].constraints and t.prompt == source[t.task_id].prompt
    for name in ("target", "heldout"):
        assert not any(
            c.type.value == "quality"
            for t in load_tasks(split_dir / f"{name}.jsonl")
            for c in t.constraints
        )
    assert json.loads((split_dir / "manifest.json").read_text())["preservation_quality"] == 0.5
    none = prepare_splits(task_files, tmp_path / "none", seed=0, preservation_quality=None)
    assert none["preservation_quality"] is None
    assert not any(
        c.type.value == "quality"
        for t in load_tasks(tmp_path / "none" / "preservation.jsonl")
        for c in t.constraints
    )
    verify_splits(tmp_path / "none")
    with pytest.raises(SplitError, match="preservation_quality 2.0"):
        prepare_splits(task_files, tmp_path / "bad", seed=0, preservation_quality=2.0)
