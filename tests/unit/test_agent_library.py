"""The agent's ``image_search``: a captioned reference library (from an index in an
artifact store), transient ids after the request's references, and a program that picks a
found image reaching the runtime's program as a reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evoharness.agent.library import CaptionedLibrary, library_from_index
from evoharness.agent.loop import AgentTurn, FinalAnswer, Toolbox, ToolCall
from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.local_store import LocalArtifactStore
from evoharness.program import ImageRef
from evoharness.runtime.runtime import HarnessRuntime
from evoharness.runtime.tool_backends import ToolBackends
from evoharness.sim import SimGenerator

ENTRIES = [
    (ImageRef(bucket="lib", key="lib/dog-brown.png"), "a brown dog sitting"),
    (ImageRef(bucket="lib", key="lib/hat-red.png"), "a red wool hat"),
    (ImageRef(bucket="lib", key="lib/car-yellow.png"), "a yellow car, side view"),
]


def test_captions_rank_and_ids_are_transient() -> None:
    lib = CaptionedLibrary(ENTRIES)
    assert lib.name == "library:tfidf"
    hits = lib.search("red hat", 2)
    assert hits[0].ref.key == "lib/hat-red.png" and hits[0].caption == "a red wool hat"
    box = Toolbox(library=lib, library_top_k=2, first_id=3)
    obs, cost, failure = box.call("image_search", {"query": "red hat"})
    assert failure is None and cost == 1.0
    assert obs[0]["img_id"] == "IMG_003" and "key" not in json.dumps(obs)
    again, _, _ = box.call("image_search", {"query": "a wool hat"})
    assert again[0]["img_id"] == "IMG_003"  # the same image keeps its id
    assert box.found["IMG_003"] == ENTRIES[1][0]
    with pytest.raises(ValueError, match="empty caption"):
        CaptionedLibrary([(ENTRIES[0][0], " ")])


def test_library_from_an_index_in_the_store(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    doc = {"images": [{**r.model_dump(), "caption": c} for r, c in ENTRIES]}
    store.put("library/index.json", json.dumps(doc).encode())
    lib = library_from_index(store, "library/index.json")
    assert lib.search("yellow car", 1)[0].ref == ENTRIES[2][0]
    store.put("library/bad.json", json.dumps({"images": [{"key": "x"}]}).encode())
    with pytest.raises(ValueError, match=r"images\[0\] needs a 'caption'"):
        library_from_index(store, "library/bad.json")


class _Picks:
    """Searches the library, then answers a program referencing what it found."""

    name = "llm"

    def next_turn(self, task: Any, trajectory: Any) -> AgentTurn:
        if not trajectory:
            return AgentTurn(ToolCall("image_search", {"query": "red hat"}, "c1"))
        found = trajectory[0]["observation"][0]["img_id"]
        program = {
            "gen_prompt": "the dog from image 1 wearing the hat from image 2",
            "reference_images": [
                {"img_id": "IMG_001", "role": "subject"},
                {"img_id": found, "role": "object"},
            ],
        }
        return AgentTurn(FinalAnswer(json.dumps(program)))


def test_a_found_image_becomes_a_reference_of_the_program(repo_root: Path) -> None:
    base = load_dir(repo_root / "harnesses" / "baseline")
    tools = [
        {"name": "refs", "kind": "image_search", "top_k": 2},
        {"name": "agent", "kind": "agent", "backend": "llm"},
    ]
    h = apply_patch(
        base,
        {
            "responsibility": "tools",
            "ops": [{"op": "add", "path": "/tools/tools/-", "value": t} for t in tools],
        },
    )
    dog = ImageRef(key="request/dog.png")
    rt = HarnessRuntime(
        h,
        SimGenerator(),
        tools=ToolBackends(agent_backend=_Picks(), reference_library=CaptionedLibrary(ENTRIES)),
    )
    c = rt.compile("my dog in a red hat", 1, [dog])
    assert [r.key for r in c.program.references or []] == ["request/dog.png", "lib/hat-red.png"]
    (rec,) = [t for t in c.trace if t["step"] == "agent"]
    assert rec["trajectory"][0]["observation"][0]["img_id"] == "IMG_002"
    # without a library the tool is not offered and the trace says so
    c = HarnessRuntime(h, SimGenerator(), tools=ToolBackends(agent_backend=_Picks())).compile(
        "a hat", 1, [dog]
    )
    (rec,) = [t for t in c.trace if t["step"] == "agent"]
    assert any("no reference library" in n for n in rec["notes"])
    assert rec["failures"][0]["kind"] == "unknown_tool"
