"""The sim backend (the embedded CPU world, a simulator) through the generation service:
the service's image equals the in-process simulator's, reference images are read from S3,
and the simulator's bad-layout errors come back as INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from evoharness.capabilities import FULL
from evoharness.program import GenerationParams, LayoutItem, Program
from services.common.errors import InvalidField
from services.generation.client import GenerationClient
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import ServiceHandle, s3_config

PARAMS = GenerationParams(steps=20, guidance_scale=6.0, width=256, height=256)


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    name = f"sim-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


@pytest.fixture(scope="module")
def sim_service(service_factory: Any, s3_server: Any, bucket: str) -> ServiceHandle:
    s3, env = s3_config(s3_server, bucket)
    return service_factory("generation", {"backend": "sim", "s3": s3}, env=env)


def test_sim_through_the_service_matches_in_process(
    sim_service: ServiceHandle, s3_server: Any, bucket: str
) -> None:
    from evoharness.sim import SimGenerator

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    local = SimGenerator()
    program = Program(prompt="a photo of two red apples and a blue car", params=PARAMS, seed=11)
    with GenerationClient(sim_service.address, store, include_manifest=True, backend="sim") as c:
        assert c.generator_id == local.generator_id
        # the profile's declared capabilities (everything, for a world that declares none)
        assert c.capabilities == getattr(local, "capabilities", FULL)
        img = c.generate(program)
        again = c.generate(program)
    want = local.generate(program)
    assert img.png == want.png and img.manifest == want.manifest
    assert not img.cached and again.cached and again.manifest == want.manifest


def test_sim_reads_reference_images_from_s3(
    sim_service: ServiceHandle, s3_server: Any, bucket: str
) -> None:
    from evoharness.sim import reference_library as rl

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    png = rl.render(rl.LibraryEntry("cat", "yellow"))  # a reference with a subject
    ref = store.put_content(png, prefix="refs", suffix=".png")
    # the prompt binds the reference ("image 1"): an unmentioned one is mostly ignored
    program = Program(prompt="a dog next to the cat from image 1", params=PARAMS, references=[ref])
    with GenerationClient(sim_service.address, store) as c:
        with_ref = c.generate(program)
        without = c.generate(program.model_copy(update={"references": None}))
    assert with_ref.png != without.png


def test_sim_bad_layout_is_invalid_argument(
    sim_service: ServiceHandle, s3_server: Any, bucket: str
) -> None:
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    program = Program(
        prompt="a thing",
        params=PARAMS,
        layout=[LayoutItem(label="bagpipe", box=(0.1, 0.1, 0.5, 0.5))],
    )
    before = set(store.list_keys())
    with GenerationClient(sim_service.address, store) as c, pytest.raises(InvalidField) as err:
        c.generate(program)
    assert err.value.field == "program.layout[0].label" and "bagpipe" in str(err.value)
    assert set(store.list_keys()) == before


def test_profile_from_config_and_unhonoured_conditioning_is_failed_precondition(
    service_factory: Any, s3_server: Any, bucket: str
) -> None:
    """The profile is the deployment's (service config), and a program using conditioning the
    profile does not honour (flux-like: no layout, no negative prompt) is refused with
    FAILED_PRECONDITION naming the capability; nothing is stored."""
    from evoharness.sim import SimGenerator
    from evoharness.sim.profiles import load_profile
    from services.common.errors import FailedPrecondition

    s3, env = s3_config(s3_server, bucket)
    flux = service_factory(
        "generation", {"backend": "sim", "s3": s3, "sim_profile": "flux-like"}, env=env
    )
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    layout = [LayoutItem(label="cat", box=(0.1, 0.1, 0.5, 0.5))]
    before = set(store.list_keys())
    with GenerationClient(flux.address, store) as c:
        assert c.generator_id == SimGenerator(load_profile("flux-like")).generator_id
        with pytest.raises(FailedPrecondition, match="layout"):
            c.generate(Program(prompt="a cat", params=PARAMS, layout=layout))
        with pytest.raises(FailedPrecondition, match="negative_prompt"):
            c.generate(Program(prompt="a cat", params=PARAMS, negative_prompt="dog"))
        assert set(store.list_keys()) == before
        img = c.generate(Program(prompt="a cat", params=PARAMS))
    assert img.seconds == pytest.approx(
        SimGenerator(load_profile("flux-like"))
        .generate(Program(prompt="a cat", params=PARAMS))
        .seconds
    )
