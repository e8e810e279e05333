"""prepare_splits / verify_splits on the real GenEval + PartiPrompts tasks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evoharness.canonical import sha256_hex
from evoharness.tasks.builders import build_tasks, write_jsonl
from evoharness.tasks.class_cover import prompt_classes
from evoharness.tasks.io import load_tasks
from evoharness.tasks.models import Task, normalize_prompt
from evoharness.tasks.split_manifest import verify_splits
from evoharness.tasks.split_prepare import build_run_splits, prepare_splits
from evoharness.tasks.splits import (
    SPLITS,
    SplitError,
    compute_splits,
    scaled_sizes,
    stratified_order,
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


def test_500_100_100_100_disjoint_and_labelled(split_dir: Path, task_files: list[Path]) -> None:
    splits = {name: load_tasks(split_dir / f"{name}.jsonl") for name in SPLITS}
    assert [len(splits[n]) for n in SPLITS] == [500, 100, 100, 100]
    ids = [t.task_id for n in SPLITS for t in splits[n]]
    prompts = [normalize_prompt(t.prompt) for n in SPLITS for t in splits[n]]
    assert len(set(ids)) == len(ids) == 800
    assert len(set(prompts)) == 800
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
    for name, size in zip(SPLITS, (500, 100, 100, 100), strict=True):
        fams = manifest["splits"][name]["families"]
        for fam, p in share.items():
            # systematic sampling: within one task of the proportional share
            assert abs(fams.get(fam, 0) - p * size) <= 1.0 + 1e-9, (name, fam)


def test_manifest_records_counts_seed_and_hashes(split_dir: Path, task_files: list[Path]) -> None:
    m = json.loads((split_dir / "manifest.json").read_text())
    assert m["seed"] == 0 and m["sizes"] == [500, 100, 100, 100] and m["manifest_version"] == 2
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


def test_verify_refuses_an_unknown_file_in_the_split_folder(
    split_dir: Path, tmp_path: Path
) -> None:
    """A split folder holds its manifest and split files only (as a harness folder holds only
    its own files): an extra ``extra.jsonl`` is named, not passed over with "ok"."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(split_dir, copy)
    m = json.loads((copy / "manifest.json").read_text())
    for e in m["inputs"]:
        e["path"] = str((split_dir / e["path"]).resolve())
    (copy / "manifest.json").write_text(json.dumps(m))
    (copy / ".DS_Store").write_bytes(b"")  # hidden files are ignored
    verify_splits(copy)
    (copy / "extra.jsonl").write_text("")
    with pytest.raises(SplitError, match=r"extra\.jsonl: unknown file in a split folder"):
        verify_splits(copy)


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
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    m = prepare_splits(files, tmp_path / "s", (500, 100, 100), seed=3)
    assert m["sizes"] == [10, 2, 2] and m["dropped_duplicates"] == 1
    assert not (tmp_path / "s" / "test.jsonl").exists() and "test" not in m["splits"]
    # the default four sizes shrink 5:1:1:1 (largest remainder, ties to the earlier split)
    assert prepare_splits(files, tmp_path / "s4", seed=3)["sizes"] == [9, 2, 2, 1]
    verify_splits(tmp_path / "s4")
    assert all(
        t.task_id != "b/1" for n in SPLITS[:3] for t in load_tasks(tmp_path / "s" / f"{n}.jsonl")
    )
    verify_splits(tmp_path / "s")


@pytest.mark.parametrize("sizes", [(6, 2, 2, 0), (10**23, 2, 2, 2)])
def test_a_test_size_of_zero_writes_an_empty_test_split(
    tmp_path: Path, sizes: tuple[int, ...]
) -> None:
    """A fourth size of 0 (or one that scales to 0 against a huge target) is an empty test
    split, like an empty held-out split; it used to stop with KeyError 'test'."""
    tasks = [Task(task_id=f"a/{i}", prompt=f"prompt {i}", task_family="x") for i in range(14)]
    write_jsonl(tasks, tmp_path / "a.jsonl")
    m = prepare_splits([tmp_path / "a.jsonl"], tmp_path / "s", sizes, seed=0)
    assert m["splits"]["test"]["count"] == 0
    assert (tmp_path / "s" / "test.jsonl").read_bytes() == b""
    assert verify_splits(tmp_path / "s")["sizes"] == m["sizes"]


def test_verify_a_split_file_instead_of_the_folder_says_so(split_dir: Path) -> None:
    """``verify-splits tasks/splits/target.jsonl`` names what to give instead of reading the
    task file as a manifest ("invalid JSON: Extra data")."""
    with pytest.raises(SplitError, match=r"target\.jsonl: not a manifest; give the split folder"):
        verify_splits(split_dir / "target.jsonl")


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


def test_preservation_covers_the_object_vocabulary(split_dir: Path) -> None:
    """The preservation split is chosen for object-class coverage within the family counts of
    a stratified chunk: it names more of the 80 classes than that chunk would."""
    m = json.loads((split_dir / "manifest.json").read_text())
    pres = load_tasks(split_dir / "preservation.jsonl")
    covered = set().union(*(prompt_classes(t.prompt) for t in pres))
    assert m["splits"]["preservation"]["classes"] == len(covered)
    used = {
        t.task_id
        for n in ("target", "heldout", "test")
        for t in load_tasks(split_dir / f"{n}.jsonl")
    }
    source = [
        t
        for f in json.loads((split_dir / "manifest.json").read_text())["inputs"]
        for t in load_tasks(split_dir / f["path"])
    ]
    rest = [t for t in stratified_order(source, 0) if t.task_id not in used]
    chunk = set().union(*(prompt_classes(t.prompt) for t in rest[:100]))
    assert len(covered) > len(chunk)


def test_three_sizes_mean_no_test_split_and_version_1_manifests_verify(
    task_files: list[Path], tmp_path: Path
) -> None:
    m = prepare_splits(task_files, tmp_path / "three", (60, 20, 20), seed=0)
    assert sorted(m["splits"]) == ["heldout", "preservation", "target"]
    assert verify_splits(tmp_path / "three")["sizes"] == [60, 20, 20]
    # a manifest of version 1 (three contiguous chunks) still verifies with its own algorithm
    per_file = [(str(f), load_tasks(f)) for f in task_files]
    v1 = compute_splits(per_file, (60, 20, 20), 0, version=1).splits
    for name, tasks in v1.items():
        write_jsonl(tasks, tmp_path / "three" / f"{name}.jsonl")
        m["splits"][name]["sha256"] = sha256_hex(
            (tmp_path / "three" / f"{name}.jsonl").read_bytes()
        )
    m["manifest_version"] = 1
    (tmp_path / "three" / "manifest.json").write_text(json.dumps(m))
    verify_splits(tmp_path / "three")
    m["manifest_version"] = 2
    (tmp_path / "three" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SplitError, match="does not match the split recomputed"):
        verify_splits(tmp_path / "three")


def test_build_run_splits_is_what_both_evolution_jobs_use(shared_dir: Path, tmp_path: Path) -> None:
    four = build_run_splits(shared_dir, tmp_path / "four", (6, 2, 2, 2), synthetic_count=8)
    assert {k: len(v) for k, v in four.items()} == {
        "target": 6,
        "heldout": 2,
        "preservation": 2,
        "test": 2,
    }
    assert (tmp_path / "four" / "tasks" / "synthetic.jsonl").is_file()
    verify_splits(tmp_path / "four" / "splits")
    three = build_run_splits(shared_dir, tmp_path / "three", (6, 2, 2))
    assert sorted(three) == ["heldout", "preservation", "target"]
    with pytest.raises(SplitError, match="GenEval metadata not found"):
        build_run_splits(tmp_path, tmp_path / "none", (6, 2, 2, 2))
    with pytest.raises(SplitError, match="3 or 4 integers"):
        build_run_splits(shared_dir, tmp_path / "bad", (6, 2))


@pytest.mark.parametrize("version", [99, 0, "two"])
def test_verify_refuses_an_unknown_manifest_version(
    split_dir: Path, tmp_path: Path, version: object
) -> None:
    """A manifest from a later (or a corrupted) evoharness is refused naming the file and the
    field, not verified with whatever algorithm this version happens to have."""
    import shutil

    copy = tmp_path / "s"
    shutil.copytree(split_dir, copy)
    m = json.loads((copy / "manifest.json").read_text())
    m["manifest_version"] = version
    (copy / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(
        SplitError,
        match=r"manifest\.json: manifest_version .* is not one this evoharness reads \(1 or 2\)",
    ):
        verify_splits(copy)
