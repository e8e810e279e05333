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
