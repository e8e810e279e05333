"""Dataset builders against the real ``../shared/data`` files and hand-written rows."""

from __future__ import annotations

import json
import re
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from evoharness.tasks.builders import (
    BuildError,
    build_tasks,
    write_jsonl,
)
from evoharness.tasks.io import TaskFileError, load_tasks
from evoharness.tasks.models import RELATIONS, Constraint, ConstraintType, Task, normalize_prompt
from evoharness.vocab import CLASSES, NUMBER_WORDS

T2I_FILES = [
    "3d_spatial",
    "color",
    "complex",
    "non_spatial",
    "numeracy",
    "shape",
    "spatial",
    "texture",
]
#: ../shared/README.md: duplicate lines after normalising case and punctuation.
T2I_DUPLICATES = {"color": 21, "shape": 15, "texture": 5}


@pytest.fixture(scope="module")
def geneval_file(shared_dir: Path) -> Path:
    return shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl"


@pytest.fixture(scope="module")
def geneval(geneval_file: Path) -> list[Task]:
    return build_tasks("geneval", geneval_file).tasks


def _word_number(prompt: str) -> int:
    words = {w: n for n, w in NUMBER_WORDS.items()}
    for token in prompt.split():
        if token in words:
            return words[token]
    raise AssertionError(f"no number word in {prompt!r}")


def _classes_in_order(prompt: str) -> list[str]:
    """Class names mentioned in ``prompt``, by position (longest match wins)."""
    found = []
    for cls in sorted(CLASSES, key=len, reverse=True):
        for m in re.finditer(rf"\b{re.escape(cls)}(e?s)?\b", prompt):
            if not any(s <= m.start() < e for s, e, _ in found):
                found.append((m.start(), m.end(), cls))
    return [c for _, _, c in sorted(found)]


def test_geneval_builds_553_tasks_in_every_tag_family(geneval_file: Path) -> None:
    result = build_tasks("geneval", geneval_file)
    raw = [json.loads(line) for line in geneval_file.read_text(encoding="utf-8").splitlines()]
    assert result.summary.rows == len(raw) == 553
    assert result.summary.kept == 553 and result.summary.n_dropped == 0
    assert result.summary.families == dict(sorted(Counter(r["tag"] for r in raw).items()))
    assert set(result.summary.families) == {
        "single_object",
        "two_object",
        "counting",
        "colors",
        "position",
        "color_attr",
    }
    for task, row in zip(result.tasks, raw, strict=True):
        assert task.prompt == row["prompt"]  # verbatim
        assert task.task_family == row["tag"]
        assert [c.constraint_id for c in task.constraints] == [
            f"c{i}" for i in range(len(task.constraints))
        ]


def test_geneval_constraints_match_the_prompt_text(geneval: list[Task]) -> None:
    """Checks every task against its prompt wording, independently of the metadata parser."""
    by_family: dict[str, int] = Counter()
    for t in geneval:
        kinds = [c.type for c in t.constraints]
        mentioned = _classes_in_order(t.prompt.removeprefix("a photo of "))
        by_family[t.task_family] += 1
        if t.task_family == "single_object":
            assert kinds == [ConstraintType.object]
            assert [t.constraints[0].subject] == mentioned
        elif t.task_family == "two_object":
            assert kinds == [ConstraintType.object, ConstraintType.object]
            assert [c.subject for c in t.constraints] == mentioned
        elif t.task_family == "counting":
            (c,) = t.constraints
            n = _word_number(t.prompt)
            assert c.type is ConstraintType.count
            assert (c.min_count, c.max_count) == (n, n), t.prompt  # "two clocks" = exactly two
            assert [c.subject] == mentioned
        elif t.task_family == "colors":
            assert kinds == [ConstraintType.object, ConstraintType.color]
            obj, col = t.constraints
            assert col.subject == obj.subject
            assert t.prompt == f"a photo of {_a(f'{col.value} {col.subject}')}"
        elif t.task_family == "color_attr":
            assert kinds == [ConstraintType.object, ConstraintType.color] * 2
            m = re.fullmatch(r"a photo of an? (\w+) (.+) and an? (\w+) (.+)", t.prompt)
            assert m is not None
            assert (t.constraints[1].value, t.constraints[1].subject) == (m[1], m[2])
            assert (t.constraints[3].value, t.constraints[3].subject) == (m[3], m[4])
        elif t.task_family == "position":
            assert kinds == [ConstraintType.object, ConstraintType.object, ConstraintType.position]
            pos = t.constraints[2]
            # "a photo of a dog right of a teddy bear": subject dog, relation, value teddy bear
            assert t.prompt == f"a photo of {_a(pos.subject)} {pos.relation} {_a(pos.value)}"
            assert pos.ref is not None and t.constraints[pos.ref].subject == pos.value
        else:
            raise AssertionError(f"unexpected family {t.task_family}")
    assert by_family["counting"] == 80 and by_family["position"] == 100


def _a(noun: object) -> str:
    s = str(noun)
    return f"an {s}" if s[0] in "aeiou" else f"a {s}"


def test_geneval_task_ids_are_stable_and_line_based(geneval_file: Path, tmp_path: Path) -> None:
    ids = [t.task_id for t in build_tasks("geneval", geneval_file).tasks]
    assert (
        ids[0] == "geneval/evaluation_metadata/1" and ids[-1] == "geneval/evaluation_metadata/553"
    )
    # Editing a prompt keeps its id: ids come from the line, never the text.
    lines = geneval_file.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[9])
    row["prompt"] = "a photo of a different cup"
    lines[9] = json.dumps(row)
    edited = tmp_path / "evaluation_metadata.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [t.task_id for t in build_tasks("geneval", edited).tasks] == ids


def test_partiprompts_1632_rows_verbatim(shared_dir: Path) -> None:
    path = shared_dir / "data" / "partiprompts" / "PartiPrompts.tsv"
    result = build_tasks("partiprompts", path)
    s = result.summary
    assert s.rows == 1632
    assert s.kept + s.n_dropped == 1632
    data_lines = path.read_text(encoding="utf-8").splitlines()[1:]
    prompts = [line.split("\t")[0] for line in data_lines]
    dups = len(prompts) - len({normalize_prompt(p) for p in prompts})
    assert s.n_dropped == dups
    kept = {t.task_id: t for t in result.tasks}
    for lineno, line in enumerate(data_lines, start=2):
        prompt, category, challenge, note = line.split("\t")
        t = kept.get(f"partiprompts/PartiPrompts/{lineno}")
        if t is None:
            continue
        assert t.prompt == prompt  # quotes kept: no CSV unquoting
        assert t.task_family == category and t.constraints == []
        assert t.metadata["challenge"] == challenge and t.metadata["note"] == note
    assert any(t.prompt.startswith('"G I G G L E"') for t in result.tasks)


@pytest.mark.parametrize("name", T2I_FILES)
def test_t2icompbench_each_training_file(shared_dir: Path, name: str) -> None:
    path = shared_dir / "data" / "t2icompbench" / f"{name}_train.txt"
    raw = path.read_bytes().decode("utf-8")
    lines = [line.rstrip("\r") for line in raw.split("\n") if line.strip()]
    result = build_tasks("t2icompbench", path)
    assert result.summary.rows == len(lines) == 700
    assert result.summary.n_dropped == T2I_DUPLICATES.get(name, 0)
    assert result.summary.kept == 700 - result.summary.n_dropped
    assert {t.task_family for t in result.tasks} == {name}
    assert all("\r" not in t.prompt and "\n" not in t.prompt for t in result.tasks)
    kept = {t.task_id: t.prompt for t in result.tasks}
    # Verbatim and line-numbered, the last line too (most files lack a final newline).
    for i, line in enumerate(lines, start=1):
        if f"t2icompbench/{name}_train/{i}" in kept:
            assert kept[f"t2icompbench/{name}_train/{i}"] == line
    assert f"t2icompbench/{name}_train/700" in kept or result.summary.n_dropped
    for dropped, first in result.summary.dropped:
        assert int(dropped.rsplit("/", 1)[1]) > int(first.rsplit("/", 1)[1])


def test_t2icompbench_folder_builds_all_eight(shared_dir: Path) -> None:
    result = build_tasks("t2icompbench", shared_dir / "data" / "t2icompbench")
    assert sorted(result.summary.families) == sorted(T2I_FILES)
    per = {f.removesuffix("_train.txt"): v["dropped"] for f, v in result.summary.per_file.items()}
    assert per == {n: T2I_DUPLICATES.get(n, 0) for n in T2I_FILES}
    assert result.summary.rows == 5600


def test_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    f = tmp_path / "color_train.txt"
    f.write_bytes(b"a red car\r\nA Red Car!\r\n\r\na blue dog")
    r = build_tasks("t2icompbench", f)
    assert [t.prompt for t in r.tasks] == ["a red car", "a blue dog"]
    assert [t.task_id for t in r.tasks] == [
        "t2icompbench/color_train/1",
        "t2icompbench/color_train/4",
    ]
    assert r.summary.dropped == [("t2icompbench/color_train/2", "t2icompbench/color_train/1")]


# ------------------------------------------------------------------ WISE and GenEval2

WISE_ROWS = [
    {
        "Prompt": "The national flower of Japan in full bloom",
        "Explanation": "Cherry blossoms (sakura), pink flowers on branches",
        "Category": "Cultural common sense",
        "Subcategory": "Festival",
        "prompt_id": 1,
    },
    {
        "Prompt": "Water at -10 degrees Celsius in a glass",
        "Explanation": "Solid ice in the glass",
        "Category": "Natural science",
        "Subcategory": "Physics",
        "prompt_id": 2,
    },
]


def test_wise_json_array(tmp_path: Path) -> None:
    f = tmp_path / "cultural.json"
    f.write_text(json.dumps(WISE_ROWS, indent=2), encoding="utf-8")
    r = build_tasks("wise", f)
    assert [t.task_id for t in r.tasks] == ["wise/cultural/2", "wise/cultural/9"]
    t = r.tasks[0]
    assert t.prompt == WISE_ROWS[0]["Prompt"] and t.task_family == "Cultural common sense"
    assert t.metadata["subcategory"] == "Festival" and t.metadata["prompt_id"] == 1
    assert t.metadata["explanation"].startswith("Cherry")
    assert t.constraints == []


def test_wise_duplicate_prompt_id_and_missing_field(tmp_path: Path) -> None:
    f = tmp_path / "w.json"
    rows = [WISE_ROWS[0], {**WISE_ROWS[1], "prompt_id": 1}]
    f.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    with pytest.raises(BuildError, match=r"w\.json:9: duplicate prompt_id 1 \(first at line 2\)"):
        build_tasks("wise", f)
    rows = [WISE_ROWS[0], {k: v for k, v in WISE_ROWS[1].items() if k != "Category"}]
    f.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    with pytest.raises(BuildError, match=r"w\.json:9: missing field 'Category'"):
        build_tasks("wise", f)
    f.write_text('[\n {"Prompt": "x",\n  oops}\n]', encoding="utf-8")
    with pytest.raises(BuildError, match=r"w\.json:3: invalid JSON"):
        build_tasks("wise", f)


GENEVAL2_ROWS = [
    {
        "prompt": "three red apples on a wooden table",
        "atom_count": 4,
        "vqa_list": [
            ["Are there apples?", "yes"],
            ["Are there exactly three apples?", "yes"],
            ["Are the apples red?", "yes"],
            ["Is there a wooden table?", True],
        ],
        "skills": ["object", "count", "color", "material"],
    },
    {
        "prompt": "a cat that is not sleeping",
        "atom_count": 2,
        "vqa_list": [["Is there a cat?", "yes"], ["Is the cat sleeping?", "no"]],
        "skills": ["object", "negation"],
    },
]


def test_geneval2_vqa_constraints(tmp_path: Path) -> None:
    f = tmp_path / "geneval2.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in GENEVAL2_ROWS), encoding="utf-8")
    r = build_tasks("geneval2", f)
    assert [t.task_id for t in r.tasks] == ["geneval2/geneval2/1", "geneval2/geneval2/2"]
    t = r.tasks[0]
    assert t.task_family == "atoms_4" and t.metadata["skills"] == GENEVAL2_ROWS[0]["skills"]
    assert [(c.constraint_id, c.type, c.subject, c.value) for c in t.constraints] == [
        ("c0", ConstraintType.vqa, "Are there apples?", "yes"),
        ("c1", ConstraintType.vqa, "Are there exactly three apples?", "yes"),
        ("c2", ConstraintType.vqa, "Are the apples red?", "yes"),
        ("c3", ConstraintType.vqa, "Is there a wooden table?", "yes"),
    ]
    assert r.tasks[1].constraints[1].value == "no"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**GENEVAL2_ROWS[0], "vqa_list": [["only a question"]]}, r"vqa_list\[0\]: expected"),
        ({k: v for k, v in GENEVAL2_ROWS[0].items() if k != "atom_count"}, "missing field"),
        ({**GENEVAL2_ROWS[0], "atom_count": "four"}, "'atom_count' must be int"),
    ],
)
def test_geneval2_malformed_rows(tmp_path: Path, row: dict, message: str) -> None:
    f = tmp_path / "g2.jsonl"
    f.write_text(json.dumps(GENEVAL2_ROWS[1]) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(BuildError, match=rf"g2\.jsonl:2: .*{message}"):
        build_tasks("geneval2", f)


# ------------------------------------------------------------------ malformed GenEval rows

GOOD = {"tag": "single_object", "include": [{"class": "cup", "count": 1}], "prompt": "a cup"}


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "invalid JSON"),
        (json.dumps({"tag": "x", "include": []}), "missing field 'prompt'"),
        (
            json.dumps({**GOOD, "include": [{"class": "cup", "count": 1, "size": "big"}]}),
            r"unknown constraint type\(s\) \['size'\]",
        ),
        (
            json.dumps({**GOOD, "include": [{"class": "cup", "count": 1, "color": "teal"}]}),
            "not a GenEval colour",
        ),
        (
            json.dumps(
                {
                    **GOOD,
                    "include": [
                        {"class": "cup", "count": 1},
                        {"class": "dog", "count": 1, "position": ["behind", 0]},
                    ],
                }
            ),
            "relation 'behind'",
        ),
        (
            json.dumps(
                {**GOOD, "include": [{"class": "cup", "count": 1, "position": ["above", 3]}]}
            ),
            r"refers to include\[3\]",
        ),
        (json.dumps({**GOOD, "extra": 1}), r"unknown field\(s\) \['extra'\]"),
        # GenEval has six tags and 80 classes: anything else is a typo or another benchmark
        (
            json.dumps({**GOOD, "tag": "single_objects"}),
            r"tag: 'single_objects' is not a GenEval tag .*did you mean 'single_object'\?",
        ),
        (
            json.dumps({**GOOD, "include": [{"class": "cupp", "count": 1}]}),
            r"include\[0\]\.class: 'cupp' is not one of GenEval's 80 object classes"
            r".*did you mean 'cup'\?",
        ),
        (
            json.dumps({**GOOD, "exclude": [{"class": "unicorn", "count": 1}]}),
            r"exclude\[0\]\.class: 'unicorn' is not one of GenEval's 80 object classes",
        ),
        (json.dumps({**GOOD, "prompt": "   "}), "prompt is empty"),
    ],
)
def test_malformed_geneval_stops_with_file_and_line(
    tmp_path: Path, bad_line: str, message: str
) -> None:
    f = tmp_path / "meta.jsonl"
    f.write_text(json.dumps(GOOD) + "\n\n" + bad_line + "\n", encoding="utf-8")
    with pytest.raises(BuildError, match=rf"meta\.jsonl:3: .*{message}"):
        build_tasks("geneval", f)


def test_geneval_exclude_semantics(tmp_path: Path) -> None:
    rows = [
        {
            "tag": "counting",
            "include": [{"class": "clock", "count": 2}],
            "exclude": [{"class": "clock", "count": 3}],
            "prompt": "two clocks",
        },
        {
            "tag": "counting",
            "include": [{"class": "cup", "count": 3}],
            "prompt": "at least three cups",
        },
        {
            "tag": "single_object",
            "include": [{"class": "cup", "count": 1}],
            "exclude": [{"class": "dog", "count": 1}],
            "prompt": "a cup and no dog",
        },
    ]
    f = tmp_path / "m.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    a, b, c = build_tasks("geneval", f).tasks
    assert (a.constraints[0].min_count, a.constraints[0].max_count) == (2, 2)
    assert (b.constraints[0].min_count, b.constraints[0].max_count) == (3, None)
    assert [(k.type, k.subject) for k in c.constraints] == [
        (ConstraintType.object, "cup"),
        (ConstraintType.negative, "dog"),
    ]


# ------------------------------------------------------------------ synthetic and files


def test_synthetic_missing_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "evoharness.tasks.synthetic", None)
    with pytest.raises(BuildError, match="evoharness.tasks.synthetic.build_synthetic"):
        build_tasks("synthetic", None, seed=1, count=3)


def test_synthetic_dedup_and_duplicate_task_id(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def build_synthetic(seed: int, count: int) -> list[Task]:
        calls.append((seed, count))
        prompts = ["two dogs", "Two dogs.", "a red cup"][:count]
        return [
            Task(task_id=f"synthetic/s{seed}/{i}", prompt=p, task_family="counting")
            for i, p in enumerate(prompts, start=1)
        ]

    mod = types.ModuleType("evoharness.tasks.synthetic")
    mod.build_synthetic = build_synthetic  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "evoharness.tasks.synthetic", mod)
    r = build_tasks("synthetic", seed=7, count=3)
    assert calls == [(7, 3)]
    assert [t.prompt for t in r.tasks] == ["two dogs", "a red cup"]
    assert r.summary.dropped == [("synthetic/s7/2", "synthetic/s7/1")]

    def dup_ids(seed: int, count: int) -> list[Task]:
        return [Task(task_id="same", prompt=p, task_family="f") for p in ("a", "b")]

    mod.build_synthetic = dup_ids  # type: ignore[attr-defined]
    with pytest.raises(BuildError, match="duplicate task_id 'same'"):
        build_tasks("synthetic", seed=0, count=2)


def test_unknown_dataset_and_missing_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        build_tasks("nope", tmp_path)
    with pytest.raises(BuildError, match="no such file"):
        build_tasks("geneval", tmp_path / "absent.jsonl")


def test_write_and_load_round_trip(geneval: list[Task], tmp_path: Path) -> None:
    out = write_jsonl(geneval, tmp_path / "tasks.jsonl")
    assert load_tasks(out) == geneval
    data = out.read_bytes()
    write_jsonl(load_tasks(out), out)
    assert out.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.jsonl"]  # no temp files left


def test_write_jsonl_refuses_duplicate_ids_and_writes_nothing(tmp_path: Path) -> None:
    t = Task(task_id="a", prompt="x", task_family="f")
    with pytest.raises(TaskFileError, match="duplicate task_id 'a'"):
        write_jsonl([t, t], tmp_path / "o.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_load_tasks_errors_name_file_and_line(tmp_path: Path) -> None:
    t = Task(task_id="a", prompt="x", task_family="f").model_dump_json()
    f = tmp_path / "t.jsonl"
    f.write_text(t + "\n" + t + "\n", encoding="utf-8")
    with pytest.raises(
        TaskFileError, match=r"t\.jsonl:2: duplicate task_id 'a' \(first at line 1\)"
    ):
        load_tasks(f)
    f.write_text(t + "\n" + '{"task_id": "b", "prompt": "y"}\n', encoding="utf-8")
    with pytest.raises(
        TaskFileError, match=r"t\.jsonl:2: task 'b': invalid task: task_family: Field required"
    ):
        load_tasks(f)
    bad = json.loads(t)
    bad["constraints"] = [{"constraint_id": "c0", "type": "smell", "subject": "x"}]
    f.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(
        TaskFileError, match=r"t\.jsonl:1: task 'a': invalid task: constraints\.0\.type"
    ):
        load_tasks(f)
    f.write_text("[1,\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"t\.jsonl:1: invalid JSON"):
        load_tasks(f)


@pytest.mark.parametrize("relation", ["left of", "next to", "near", "behind", "in front of"])
def test_position_constraint_accepts_every_relation(relation: str) -> None:
    c = Constraint(
        constraint_id="p0",
        type=ConstraintType.position,
        subject="cat",
        relation=relation,
        value="dog",
    )
    assert c.relation in RELATIONS


@pytest.mark.parametrize("relation", ["on", "in", "", None, "Behind"])
def test_position_constraint_refuses_other_relations(relation: str | None) -> None:
    with pytest.raises(ValueError, match=r"position constraint 'p0': relation .* is not one of"):
        Constraint(
            constraint_id="p0",
            type=ConstraintType.position,
            subject="cat",
            relation=relation,
            value="dog",
        )


@pytest.mark.parametrize("field", ["min_count", "max_count"])
def test_constraint_refuses_counts_above_max_count(field: str) -> None:
    """A count past ``MAX_COUNT`` (far below the canonical-JSON limit 2**53 - 1) is refused by
    the model itself, naming the field, so no builder or loader can store one."""
    from evoharness.tasks.models import MAX_COUNT

    kw = {"min_count": 1, field: MAX_COUNT + 1}
    with pytest.raises(ValueError, match=rf"{field}\n.*less than or equal to {MAX_COUNT}"):
        Constraint(constraint_id="c0", type=ConstraintType.count, subject="cup", **kw)
    ok = Constraint(constraint_id="c0", type=ConstraintType.count, subject="cup", min_count=4)
    assert ok.min_count == 4


def test_constraint_refuses_ints_past_the_canonical_json_limit() -> None:
    with pytest.raises(ValueError, match=r"value\n.*2\*\*53"):
        Constraint(constraint_id="c0", type=ConstraintType.vqa, subject="q?", value=2**60)
    with pytest.raises(ValueError, match=r"ref\n"):
        Constraint(
            constraint_id="c0",
            type=ConstraintType.position,
            subject="cat",
            relation="above",
            value="dog",
            ref=2**60,
        )


def test_geneval_refuses_a_huge_count(tmp_path: Path) -> None:
    f = tmp_path / "meta.jsonl"
    big = {**GOOD, "include": [{"class": "cup", "count": 99999999999999999999}]}
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps(big) + "\n", encoding="utf-8")
    with pytest.raises(BuildError, match=r"meta\.jsonl:2: include\[0\]: count .*at most 1000"):
        build_tasks("geneval", f)
    big_ex = {**GOOD, "exclude": [{"class": "dog", "count": 10**20}]}
    f.write_text(json.dumps(big_ex) + "\n", encoding="utf-8")
    with pytest.raises(BuildError, match=r"meta\.jsonl:1: exclude\[0\]: count .*at most"):
        build_tasks("geneval", f)


def test_geneval_refuses_a_row_with_nothing_to_check(tmp_path: Path) -> None:
    f = tmp_path / "meta.jsonl"
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "include": []}) + "\n")
    with pytest.raises(BuildError, match=r"meta\.jsonl:2: .*a GenEval row with nothing to check"):
        build_tasks("geneval", f)


def test_one_prompt_length_limit_for_tasks_builders_and_task_files(tmp_path: Path) -> None:
    """``MAX_PROMPT_CHARS`` lives on the Task model: building (file:line) and loading a task
    file (file:line and task id) refuse a longer prompt; a prompt at the limit is kept."""
    from evoharness.tasks.models import MAX_PROMPT_CHARS

    Task(task_id="t/1", prompt="a" * MAX_PROMPT_CHARS, task_family="x")
    with pytest.raises(ValueError, match=rf"prompt\n.*over the limit of {MAX_PROMPT_CHARS}"):
        Task(task_id="t/1", prompt="a" * (MAX_PROMPT_CHARS + 1), task_family="x")
    f = tmp_path / "PartiPrompts.tsv"
    f.write_text(
        "Prompt\tCategory\tChallenge\tNote\na cat\tAnimals\tBasic\t\n"
        + "dog " * 4500
        + "\tAnimals\tBasic\t\n",
        encoding="utf-8",
    )
    with pytest.raises(BuildError, match=rf"PartiPrompts\.tsv:3: .*limit of {MAX_PROMPT_CHARS}"):
        build_tasks("partiprompts", f)
    t = Task.model_construct(
        task_id="t/2",
        prompt="b" * 18_000,
        task_family="x",
        constraints=[],
        references={},
        metadata={},
    )
    tf = tmp_path / "t.jsonl"
    tf.write_text(t.model_dump_json() + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match=r"t\.jsonl:1: task 't/2': invalid task: prompt"):
        load_tasks(tf)
