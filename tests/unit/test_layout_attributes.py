"""Layout boxes carry textures/materials and shapes (``LayoutItem.attributes``): the box's
grounding phrase ("a wooden chair", GLIGEN-class models). The planner fills them from the
prompt's attribute constraints, the simulator paints them as it paints a prompt object's, and a
program without them keeps its canonical JSON and execution key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from evoharness.capabilities import GeneratorCapabilities
from evoharness.program import LayoutItem, Program, execution_key
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.layout import plan_layout
from evoharness.sim import SimGenerator, SimInspector, texture
from evoharness.sim.profiles import load_profile
from evoharness.tasks.models import Constraint, ConstraintType

PARAMS = {"steps": 30, "guidance_scale": 5.0, "width": 512, "height": 512}


def _layout_program(attributes: tuple[str, ...] = ()) -> Program:
    return Program(
        prompt="a red cat and a sign",
        seed=7,
        layout=[
            LayoutItem(label="cat", box=(0.1, 0.2, 0.5, 0.6), color="red", attributes=attributes),
            LayoutItem(label="sign", box=(0.6, 0.6, 0.9, 0.9), text="hi"),
        ],
    )


def test_key_of_a_layout_program_without_attributes_is_unchanged() -> None:
    """The key computed before ``attributes`` existed (main at 8dcca44)."""
    prog = _layout_program()
    assert b"attributes" not in prog.canonical()
    assert "attributes" not in prog.model_dump_json()
    assert execution_key(prog, "sim/sdxl-like@abc") == (
        "fa3c8e5596d0bb56dfc78c5af4a5cba4430e8630a0c9c08789fd667a745da7f7"
    )
    textured = _layout_program(("wooden",))
    assert execution_key(textured, "sim/sdxl-like@abc") != execution_key(prog, "sim/sdxl-like@abc")
    assert Program.model_validate_json(textured.model_dump_json()) == textured


def test_bad_attribute_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as err:
        Program.model_validate(
            {
                "prompt": "a chair",
                "layout": [{"label": "chair", "box": [0.1, 0.1, 0.5, 0.5], "attributes": ["oak"]}],
            }
        )
    e = err.value.errors()[0]
    assert e["loc"] == ("layout", 0, "attributes")
    assert "'oak'" in e["msg"] and "wooden" in e["msg"] and "round" in e["msg"]


def test_phrase_puts_attributes_with_the_label() -> None:
    li = LayoutItem(label="table", box=(0.1, 0.1, 0.5, 0.5), color="red", attributes=("wooden",))
    assert li.model_copy(update={"attributes": ("wooden", "round")}).phrase() == (
        "round red wooden table"
    )
    assert LayoutItem(label="table", box=(0.1, 0.1, 0.5, 0.5)).phrase() == "table"


def test_planner_fills_attributes_from_attribute_constraints() -> None:
    cs = [
        Constraint(constraint_id="o1", type=ConstraintType.object, subject="bottle"),
        Constraint(constraint_id="o2", type=ConstraintType.object, subject="chair"),
        Constraint(
            constraint_id="a1", type=ConstraintType.attribute, subject="bottle", value="plastic"
        ),
        Constraint(constraint_id="a2", type=ConstraintType.attribute, subject="chair", value="oak"),
        Constraint(
            constraint_id="a3", type=ConstraintType.attribute, subject="chair", value="Metal"
        ),
        Constraint(
            constraint_id="a4", type=ConstraintType.attribute, subject="chair", value="cubic"
        ),
        Constraint(constraint_id="c1", type=ConstraintType.color, subject="chair", value="red"),
    ]
    items, details = plan_layout(cs)
    got = [(i.label, i.color, i.attributes) for i in items]
    assert got == [("bottle", None, ("plastic",)), ("chair", "red", ("square", "metallic"))]
    assert details["groups"][0]["attributes"] == ["plastic"]
    plain, plain_details = plan_layout(cs[:2])
    assert [i.attributes for i in plain] == [(), ()]
    assert "attributes" not in plain_details["groups"][0]


def test_capabilities_without_colour_drop_attributes() -> None:
    caps = GeneratorCapabilities(layout="adapter", layout_attributes=("text",))
    prog = _layout_program(("wooden",)).model_copy(
        update={
            "layout": [LayoutItem(label="cat", box=(0.1, 0.2, 0.5, 0.6), attributes=("wooden",))]
        }
    )
    honoured, missing = caps.honoured(prog)
    assert missing == ["layout.color"]
    assert honoured.layout is not None and honoured.layout[0].attributes == ()


def _render(attributes: tuple[str, ...], seed: int) -> tuple[bytes, dict]:
    # a profile whose layout is always followed, so the test reads what a held box draws
    params = load_profile("sdxl-like").model_copy(
        update={"layout_in_box": 1.0, "layout_color_holds": 1.0, "layout_in_box_per_box": 0.0}
    )
    prog = Program(
        prompt="a photo of a chair",
        params=PARAMS,
        seed=seed,
        layout=[LayoutItem(label="chair", box=(0.3, 0.3, 0.7, 0.7), attributes=attributes)],
    )
    img = SimGenerator(params).generate(prog)
    return img.png, img.manifest


@pytest.mark.parametrize("name", ["wooden", "striped", "glass"])
def test_textured_layout_box_draws_its_texture(name: str) -> None:
    ins = SimInspector(ocr=False)
    for seed in (1, 2):
        png, manifest = _render((name,), seed)
        assert [(o["source"], o.get("texture")) for o in manifest["objects"]] == [("layout", name)]
        scene = ins.inspect(png, read_text=False)
        assert [(d.cls, d.texture) for d in scene.detections] == [("chair", name)], seed
    png, manifest = _render((), 1)
    assert all("texture" not in o for o in manifest["objects"])
    assert [d.texture for d in ins.inspect(png, read_text=False).detections] == [texture.PLAIN]


def test_shaped_layout_box_draws_its_outline() -> None:
    ins = SimInspector(ocr=False)
    png, manifest = _render(("round",), 1)
    assert [o.get("shape") for o in manifest["objects"]] == ["round"]
    scene = ins.inspect(png, read_text=False, shapes=True)
    assert [(d.cls, d.shape) for d in scene.detections] == [("chair", "round")]


def test_box_attribute_follows_the_colour_holding_rate() -> None:
    """With the profile's ``layout_color_holds`` below 1 some boxes lose their texture, and the
    loss rate is the colour's (same rule, separate draws)."""
    gen = SimGenerator(load_profile("sdxl-like"))
    held = drawn = 0
    n = 60
    for seed in range(n):
        prog = Program(
            prompt="a photo of a chair",
            params=PARAMS,
            seed=seed,
            layout=[LayoutItem(label="chair", box=(0.3, 0.3, 0.7, 0.7), attributes=("wooden",))],
        )
        objs = [o for o in gen.generate(prog).manifest["objects"] if o["source"] == "layout"]
        held += sum(o.get("texture") == "wooden" for o in objs)
        drawn += len(objs)
    assert drawn > n // 2
    assert abs(held / drawn - gen.params.layout_color_holds) < 0.2


def test_one_count_over_several_phrases_colours_boxes_per_phrase() -> None:
    cs = RuleExtractor().extract("two red cars and a blue car")
    items, details = plan_layout(cs)
    assert [(i.label, i.color) for i in items] == [("car", "red"), ("car", "red"), ("car", "blue")]
    assert details["groups"] == [
        {"label": "car", "n": 3, "color": None, "colors": ["red", "red", "blue"]}
    ]
    items, _ = plan_layout(RuleExtractor().extract("two wooden chairs and a metal chair"))
    assert [i.attributes for i in items] == [("wooden",), ("wooden",), ("metallic",)]
    # a colour without min_count still colours a whole group (and only a group with none yet)
    red = Constraint(constraint_id="c", type=ConstraintType.color, subject="car", value="red")
    count = Constraint(
        constraint_id="n", type=ConstraintType.count, subject="car", min_count=2, max_count=2
    )
    assert [i.color for i in plan_layout([count, red])[0]] == ["red", "red"]
