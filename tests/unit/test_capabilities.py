"""GeneratorCapabilities.unsupported names exactly what a program needs and a deployment lacks."""

from evoharness.capabilities import FULL, GeneratorCapabilities
from evoharness.program import LayoutItem, Program


def _program(**kw):
    return Program(prompt="a photo of a cat", **kw)


def test_plain_program_is_supported_everywhere():
    assert GeneratorCapabilities().unsupported(_program()) == []
    assert FULL.unsupported(_program()) == []


def test_layout_on_a_generator_without_layout():
    p = _program(layout=[LayoutItem(label="cat", box=(0.1, 0.1, 0.5, 0.5), color="red")])
    assert GeneratorCapabilities(layout="none").unsupported(p) == ["layout"]
    assert GeneratorCapabilities(layout="adapter").unsupported(p) == ["layout.color"]
    assert FULL.unsupported(p) == []


def test_negative_prompt_references_and_resolution():
    caps = GeneratorCapabilities(negative_prompt=False, resolutions=((1024, 1024),))
    p = _program(negative_prompt="blurry")
    assert caps.unsupported(p) == ["negative_prompt", "resolution"]
    assert caps.unsupported(_program(negative_prompt="  ")) == ["resolution"]


def test_runtime_drops_what_the_generator_cannot_honour():
    from pathlib import Path

    from evoharness.harness.io import load_dir
    from evoharness.runtime.runtime import HarnessRuntime
    from evoharness.sim.generator import SimGenerator

    harness = load_dir(Path(__file__).resolve().parents[2] / "harnesses" / "reference")
    prompt = "a photo of a red cat to the left of a blue dog"
    full = HarnessRuntime(harness, SimGenerator()).compile(prompt, 0)
    assert full.program.layout, "the reference harness plans a layout for a relation"
    assert not any(r["step"] == "capability_drop" for r in full.trace)

    caps = GeneratorCapabilities(layout="none", negative_prompt=False)
    dropped = HarnessRuntime(harness, SimGenerator(), capabilities=caps).compile(prompt, 0)
    assert dropped.program.layout is None
    assert dropped.program.negative_prompt == ""
    record = next(r for r in dropped.trace if r["step"] == "capability_drop")
    assert "layout" in record["dropped"]
    assert caps.unsupported(dropped.program) == []
    # everything else of the program is what the harness compiled
    assert dropped.program.prompt == full.program.prompt
    assert dropped.program.params == full.program.params
