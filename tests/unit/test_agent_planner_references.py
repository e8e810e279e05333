"""The rule planner's references for materials and patterns (issue 32): which phrases get a
reference (``find_textured``), which library hit is taken (``pick_reference``), how the
program numbers them beside the request's own references, and what it leaves alone —
quoted text, negated objects, a prompt that mentions an image the request does not carry —
against the embedded reference library in a local store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoharness.agent.loop import AgentTask, Toolbox, run_agent
from evoharness.agent.planner import RulePlanner, find_textured, pick_reference
from evoharness.local_store import LocalArtifactStore
from evoharness.runtime.extract import RuleExtractor
from evoharness.sim.reference_library import EMBEDDED, open_library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return open_library(LocalArtifactStore(tmp_path_factory.mktemp("lib")), EMBEDDED)


def plan(library: Any, prompt: str, request: int = 0, max_references: int = 2) -> Any:
    """The rule planner's run on ``prompt`` with ``request`` request references."""
    box = Toolbox(None, library=library, first_id=request + 1)
    images = {f"IMG_{i:03d}": f"ref{i}.png" for i in range(1, request + 1)}
    task = AgentTask(prompt, box.specs, {}, images, max_references)
    return run_agent(task, RulePlanner(), box, max_turns=11, max_cost=20)


def _phrases(prompt: str) -> list[tuple[str, str, str | None]]:
    return [(t.cls, t.texture, t.color) for t in find_textured(prompt)]


def test_textured_phrases_are_singular_objects_not_quoted_negated_or_bound() -> None:
    assert _phrases("a wooden chair and the red striped cat") == [
        ("chair", "wooden", None),
        ("cat", "striped", "red"),
    ]
    assert _phrases("a wooden table") == [("dining table", "wooden", None)]
    assert _phrases("two wooden chairs") == []  # plural: a reference shows one
    assert _phrases('a sign that says "a wooden chair"') == []  # text to draw
    assert _phrases("a wooden chair without a striped cat") == [("chair", "wooden", None)]
    assert _phrases("a wooden chair, no striped cat") == [("chair", "wooden", None)]
    assert _phrases("the wooden chair from image 1 and image 2's striped cat") == []
    assert _phrases("a red blue wooden chair") == []  # two colours: not one object's


def test_pick_reference_takes_the_first_exact_caption() -> None:
    [chair] = find_textured("a wooden chair")
    hits = [
        {"img_id": "IMG_001", "caption": "a wooden green chair, mirrored"},  # a pose added
        {"img_id": "IMG_002", "caption": "a metallic green chair"},  # another texture
        {"img_id": "IMG_003", "caption": "a wooden green chair"},
        {"img_id": "IMG_004", "caption": "a wooden red chair"},
    ]
    assert pick_reference(chair, hits) == "IMG_003"
    [red] = find_textured("a red wooden chair")
    assert pick_reference(red, hits) == "IMG_004"
    assert pick_reference(chair, "not a list") is None
    assert pick_reference(chair, [{"img_id": 3, "caption": None}, "x"]) is None


def test_program_binds_retrieved_references_after_the_requests(library: Any) -> None:
    res = plan(library, "a wooden chair and a striped cat")
    prog = res.program
    assert prog is not None and not res.failures
    assert prog.gen_prompt == "the wooden chair from image 1 and the striped cat from image 2"
    assert [r.img_id for r in prog.reference_images] == ["IMG_001", "IMG_005"]
    # a request reference the prompt mentions comes first; the retrieved one after it
    res = plan(library, "the cup from image 2 on a wooden chair", request=2)
    prog = res.program
    assert prog is not None
    assert prog.gen_prompt == "the cup from image 1 on the wooden chair from image 2"
    assert [r.img_id for r in prog.reference_images] == ["IMG_002", "IMG_003"]
    # the budget: max_references in all
    res = plan(library, "the cup from image 1 on a wooden chair and a striped cat", 1, 2)
    assert res.program is not None and len(res.program.reference_images) == 2
    assert "budget is spent" in res.program.rationale


def test_no_retrieval_where_numbers_would_collide(library: Any) -> None:
    """The prompt names "image 1" and the request carries none: a retrieved reference would
    be image 1 too, so none is retrieved and the rationale says why."""
    res = plan(library, "a striped cat from image 1 and a wooden chair")
    prog = res.program
    assert prog is not None and prog.reference_images == []
    assert prog.gen_prompt == "a striped cat from image 1 and a wooden chair"
    assert "mentions an image the request does not carry" in prog.rationale
    assert not [r for r in res.trajectory if r.get("tool") == "image_search"]


def test_long_prompts_within_the_task_limit_make_valid_programs(library: Any) -> None:
    """A prompt up to the task limit (``MAX_PROMPT_CHARS``) is a valid ``gen_prompt``: the
    agent's program was capped at 2,000 characters and a 2,500-character prompt ran the
    loop out of turns."""
    prompt = "a wooden chair and a striped cat, " + "in a quiet room, " * 150
    assert 2_500 < len(prompt) < 10_000
    res = plan(library, prompt)
    assert res.program is not None and not res.failures
    assert res.program.gen_prompt.startswith("the wooden chair from image 1")


def test_the_extractor_reads_through_reference_bindings() -> None:
    """A binding to a reference ("from image 1", "image 2's", "(reference 3)") is no object
    and does not cut the relation around it."""
    x = RuleExtractor()
    bound = x.extract("the wooden chair from image 1 left of the striped cat from image 2")
    plain = x.extract("the wooden chair left of the striped cat")
    assert [c.constraint_id for c in bound] == [c.constraint_id for c in plain]
    assert "position:chair" in [c.constraint_id for c in bound]
    ids = [c.constraint_id for c in x.extract("image 2's cat next to a car (reference 3)")]
    assert not any("image" in i or "reference" in i for i in ids), ids
    assert "position:cat" in ids


def test_library_paths_are_relative_to_the_store(tmp_path: Path, library: Any) -> None:
    [hit] = library.search("wooden chair", 1)
    assert hit.ref.bucket == "local" and not hit.ref.key.startswith("/")
