"""The committed gRPC stubs match the .proto files, import cleanly, and the model <-> proto
conversions round-trip (including execution keys)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.ports import Cost
from evoharness.program import GenerationParams, ImageRef, LayoutItem, Program, execution_key
from evoharness.tasks.models import Constraint, ConstraintType
from services.common.errors import InvalidField
from services.protos import convert, generate
from services.protos.evoharness.v1 import common_pb2

STUB_DIR = Path(generate.OUT_ROOT) / "evoharness" / "v1"


def test_committed_stubs_are_up_to_date(tmp_path: Path) -> None:
    fresh = generate.generate(tmp_path)
    fresh_names = {p.relative_to(tmp_path) for p in fresh}
    committed = {
        p.relative_to(generate.OUT_ROOT)
        for p in (generate.OUT_ROOT / "evoharness").rglob("*")
        if p.is_file() and p.suffix in (".py", ".pyi")
    }
    assert fresh_names == committed, "stubs missing or extra: run `make protos`"
    stale = [
        str(n)
        for n in fresh_names
        if (tmp_path / n).read_bytes() != (generate.OUT_ROOT / n).read_bytes()
    ]
    assert not stale, f"stale stubs {stale}: run `make protos` and commit"


@pytest.mark.parametrize(
    "name,service",
    [
        ("generation", "GenerationService"),
        ("verification", "VerificationService"),
        ("proposer", "ProposerService"),
        ("registry", "HarnessRegistry"),
        ("runtime", "Runtime"),
    ],
)
def test_every_service_has_stub_and_servicer(name: str, service: str) -> None:
    grpc_mod = importlib.import_module(f"services.protos.evoharness.v1.{name}_pb2_grpc")
    pb2 = importlib.import_module(f"services.protos.evoharness.v1.{name}_pb2")
    assert hasattr(grpc_mod, f"{service}Stub") and hasattr(grpc_mod, f"{service}Servicer")
    assert pb2.DESCRIPTOR.package == "evoharness.v1"
    assert service in pb2.DESCRIPTOR.services_by_name


PROGRAMS = [
    Program(prompt="a red cube"),
    Program(
        prompt="two dogs",
        negative_prompt="cats",
        params=GenerationParams(steps=12, guidance_scale=7.25, width=256, height=128),
        seed=2**40 + 3,
        layout=[
            LayoutItem(label="dog", box=(0.0, 0.1, 0.5, 0.9), color="brown"),
            LayoutItem(label="sign", box=(0.5, 0.0, 1.0, 0.25), text="HI"),
        ],
        references=[ImageRef(bucket="b", key="k.png", sha256="ab" * 32)],
    ),
    Program(prompt="empty layout is not absent layout", layout=[], references=[]),
    Program(
        prompt="a round wooden table",
        layout=[
            LayoutItem(
                label="dining table", box=(0.1, 0.1, 0.6, 0.6), attributes=("round", "wooden")
            )
        ],
    ),
]


@pytest.mark.parametrize("program", PROGRAMS)
def test_program_roundtrip_preserves_execution_key(program: Program) -> None:
    wire = convert.program_to_proto(program).SerializeToString()
    msg = common_pb2.Program.FromString(wire)
    back = convert.program_from_proto(msg)
    assert back == program
    assert execution_key(back, "gen-1") == execution_key(program, "gen-1")


def test_empty_and_absent_layout_have_different_keys() -> None:
    a = convert.program_from_proto(convert.program_to_proto(Program(prompt="x")))
    b = convert.program_from_proto(convert.program_to_proto(Program(prompt="x", layout=[])))
    assert execution_key(a, "g") != execution_key(b, "g")


@pytest.mark.parametrize(
    "msg,field",
    [
        (common_pb2.Program(prompt="  "), "program.prompt"),
        (
            common_pb2.Program(
                prompt="x",
                params=common_pb2.GenerationParams(steps=0, guidance_scale=5, width=64, height=64),
            ),
            "program.params",
        ),
        (
            common_pb2.Program(
                prompt="x",
                layout=common_pb2.Layout(items=[common_pb2.LayoutItem(label="a", box=[0.1])]),
            ),
            "program.layout.0.box",
        ),
        (
            common_pb2.Program(
                prompt="x",
                layout=common_pb2.Layout(
                    items=[common_pb2.LayoutItem(label="a", box=[0.5, 0.5, 0.1, 0.9])]
                ),
            ),
            "program.layout.0.box",
        ),
        (
            common_pb2.Program(
                prompt="x",
                layout=common_pb2.Layout(
                    items=[
                        common_pb2.LayoutItem(
                            label="a", box=[0.1, 0.1, 0.5, 0.5], attributes=["oak"]
                        )
                    ]
                ),
            ),
            "program.layout.0.attributes",
        ),
    ],
)
def test_invalid_program_names_field(msg: common_pb2.Program, field: str) -> None:
    with pytest.raises(InvalidField) as err:
        convert.program_from_proto(msg)
    assert err.value.field.startswith(field)
    assert str(err.value).startswith(field)


def test_constraint_evidence_cost_roundtrip() -> None:
    cs = [
        Constraint(
            constraint_id="c0", type=ConstraintType.count, subject="dog", min_count=2, max_count=2
        ),
        Constraint(constraint_id="c1", type=ConstraintType.color, subject="dog", value="red"),
        Constraint(
            constraint_id="c2",
            type=ConstraintType.position,
            subject="dog",
            value="cat",
            relation="left of",
            ref=1,
        ),
    ]
    back = convert.constraints_from_proto([convert.constraint_to_proto(c) for c in cs])
    assert back == cs
    ev = Evidence(
        constraint_id="c1",
        status=EvidenceStatus.failed,
        confidence=0.75,
        boxes=[(0.1, 0.2, 0.3, 0.4)],
        observed={"color": "blue"},
        note="n",
        decided_by="sim",
    )
    assert convert.evidence_from_proto(convert.evidence_to_proto(ev)) == ev
    cost = Cost(generator_seconds=1.5, generator_calls=2, llm_prompt_tokens=9, extra={"usd": 0.1})
    assert convert.cost_from_proto(convert.cost_to_proto(cost)) == cost
    bad = convert.constraint_to_proto(cs[0])
    bad.type = "weird"
    with pytest.raises(InvalidField, match=r"^constraints\.0\.type"):
        convert.constraints_from_proto([bad])


def test_capabilities_round_trip_and_bad_values_name_the_field() -> None:
    from evoharness.capabilities import FULL, GeneratorCapabilities
    from services.common.errors import InvalidField

    caps = GeneratorCapabilities(
        layout="guidance", max_references=2, negative_prompt=False, resolutions=((1024, 768),)
    )
    for c in (caps, FULL, GeneratorCapabilities()):
        assert convert.capabilities_from_proto(convert.capabilities_to_proto(c)) == c
    bad = convert.capabilities_to_proto(caps)
    bad.layout = "boxes"
    with pytest.raises(InvalidField) as err:
        convert.capabilities_from_proto(bad, "generator_capabilities")
    assert err.value.field == "generator_capabilities.layout"
