"""Official scoring (``evoharness_app.official``): one scorer and one batch loop, used by the
main job's official figures and by ``evoharness eval geneval``; the two agree on the same
images."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.program import Program
from evoharness.sim import SimGenerator
from evoharness.tasks.synthetic import build_synthetic
from evoharness_app.evaluation import score_officially
from evoharness_app.official import exact_inspector, verify_images


class _Scorer:
    """Passes every constraint, except on the image ``b"bad"``, which it cannot read."""

    def verify(self, image: bytes, constraints: Any, prompt: str) -> list[str]:
        if image == b"bad":
            raise ValueError("not a PNG")
        return [f"{prompt}:{c.constraint_id}" for c in constraints]


def test_verify_images_scores_each_key_and_names_the_one_it_cannot_read() -> None:
    tasks = build_synthetic(seed=0, count=3)
    seen: list[int] = []
    out = verify_images(
        _Scorer(),
        {i: (lambda: b"png", t) for i, t in enumerate(tasks)},
        concurrency=2,
        progress=seen.append,
    )
    assert sorted(out) == [0, 1, 2] and seen == [1, 1, 1]
    assert out[1] == [f"{tasks[1].prompt}:{c.constraint_id}" for c in tasks[1].constraints]
    with pytest.raises(ValueError, match=r"^image-7: not a PNG$"):
        verify_images(_Scorer(), {"image-7": (lambda: b"bad", tasks[0])})
    with pytest.raises(ValueError, match="concurrency"):
        verify_images(_Scorer(), {}, concurrency=0)


def test_exact_inspector_leaves_the_environment_alone() -> None:
    before = dict(os.environ)
    assert exact_inspector().verify is not None
    assert dict(os.environ) == before


def test_eval_geneval_and_the_main_jobs_official_scoring_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same images give the same verdicts through ``eval geneval`` (files) and through the
    main job's ``score_officially`` (stored executions)."""
    from evoharness_app.cli import main

    tasks = [t for t in build_synthetic(seed=1, count=4) if t.constraints][:3]
    gen = SimGenerator()
    images = tmp_path / "images"
    images.mkdir()
    store: dict[str, bytes] = {}
    runs: dict[str, dict[tuple[str, int], Any]] = {"target": {}}

    class _Ex:
        def __init__(self, task_id: str, key: str) -> None:
            self.task_id = task_id
            self.image = type("Ref", (), {"key": key})()
            self.evidence: list[Any] = []

        def model_copy(self, update: dict[str, Any]) -> Any:
            new = _Ex(self.task_id, self.image.key)
            new.evidence = update["evidence"]
            return new

    for t in tasks:
        png = gen.generate(Program(prompt=t.prompt, seed=0)).png
        (images / f"{t.task_id.replace('/', '__')}__0.png").write_bytes(png)
        store[t.task_id] = png
        runs["target"][(t.task_id, 0)] = _Ex(t.task_id, t.task_id)
    (tmp_path / "tasks.jsonl").write_text(
        "".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8"
    )
    out = tmp_path / "evidence.jsonl"
    args = ["--images", str(images), "--tasks", str(tmp_path / "tasks.jsonl"), "--out", str(out)]
    rc = main(["eval", "geneval", *args])
    assert rc == 0, capsys.readouterr().err
    by_cli = {
        json.loads(line)["task_id"]: [e["status"] for e in json.loads(line)["evidence"]]
        for line in out.read_text().splitlines()
    }
    scored = score_officially(
        type("Store", (), {"get": staticmethod(store.__getitem__)})(),
        {"target": tasks},
        runs,
        exact_inspector(),
        concurrency=2,
        progress=lambda k: None,
    )
    by_job = {
        tid: [e.status.value for e in ex.evidence] for (tid, _), ex in scored["target"].items()
    }
    assert by_cli == by_job and len(by_job) == len(tasks)
    assert any(s == EvidenceStatus.passed.value for v in by_job.values() for s in v)
