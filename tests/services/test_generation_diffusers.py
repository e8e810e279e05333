"""The diffusers backend through the generation service: a tiny Stable Diffusion pipeline
built from small configs with random weights (UNet2DConditionModel, AutoencoderKL,
CLIPTextModel, a CLIPTokenizer over a vocabulary written here), saved with
``save_pretrained``, loaded by the service from a local path and from an S3 prefix, never
from a hub. A tiny GLIGEN pipeline (gated grounding attention) and the same SD weights served
as image-to-image show the program's layout and reference reach the pipeline's ``__call__``
(spied on, ``tests.fixtures.diffusers_spy``): directly, through the generation service and
through a real KServe ModelServer.

Determinism: both sides pin ``intra_op_threads`` (recorded in the generator id), so the
service's PNG equals the in-process one whatever ``OMP_NUM_THREADS`` the caller exports."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from evoharness.program import GenerationParams, LayoutItem, Program
from services.generation.client import GenerationClient
from services.generation.settings import DiffusersSettings
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import s3_config

PARAMS = GenerationParams(steps=2, guidance_scale=3.0, width=64, height=64)


def build_tiny_pipeline(out: Path, gligen: bool = False) -> Path:
    """Save a tiny random-weight StableDiffusionPipeline (``gligen``: a
    StableDiffusionGLIGENPipeline, whose UNet has gated grounding attention, as in diffusers'
    own GLIGEN tests) to ``out`` and return it."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionGLIGENPipeline,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    tok_dir = out.parent / f"{out.name}-tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["<|startoftext|>", "<|endoftext|>", "!"]
    vocab += list(letters) + [c + "</w>" for c in letters]
    (tok_dir / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (tok_dir / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(
        str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), model_max_length=77
    )
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
            hidden_size=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=len(vocab),
            max_position_embeddings=77,
        )
    )
    unet = UNet2DConditionModel(
        sample_size=32,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=4,
        norm_num_groups=8,
        **({"attention_type": "gated"} if gligen else {}),
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(16, 32),
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=8,
        sample_size=64,
    )
    scheduler = DDIMScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    if gligen:
        # GLIGEN initialises its gates (tanh(alpha)) at 0, so an untrained adapter changes
        # nothing; open them, as training does, so the boxes reach the pixels
        for module in unet.modules():
            for gate in ("alpha_attn", "alpha_dense"):
                if hasattr(module, gate):
                    getattr(module, gate).data.fill_(1.0)
    pipe_cls = StableDiffusionGLIGENPipeline if gligen else StableDiffusionPipeline
    pipe = pipe_cls(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(str(out))  # type: ignore[attr-defined]
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("diffusers")
    return build_tiny_pipeline(tmp_path_factory.mktemp("tiny-sd") / "tiny-sd")


@pytest.fixture(scope="module")
def tiny_gligen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("diffusers")
    return build_tiny_pipeline(tmp_path_factory.mktemp("tiny-gligen") / "tiny-gligen", True)


@pytest.fixture
def torch_threads() -> Any:
    """Restores this process's torch intra-op thread count after the test."""
    import torch

    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    name = f"diff-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


def _png_size(png: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return im.size


def test_diffusers_backend_through_the_service(
    tiny_model: Path, service_factory: Any, s3_server: Any, bucket: str, torch_threads: int
) -> None:
    from services.generation.backends.diffusers_backend import DiffusersGenerator

    s3, env = s3_config(s3_server, bucket)
    h = service_factory(
        "generation",
        {
            "backend": "diffusers",
            "diffusers": {
                "model_path": str(tiny_model),
                "model_name": "tiny-sd",
                "revision": "r0",
                "dtype": "float32",
                "device": "cpu",
                "scheduler": "EulerDiscreteScheduler",
                "intra_op_threads": 1,
            },
            "s3": s3,
        },
        env=env,
    )
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    program = Program(prompt="a red cube", negative_prompt="blurry", params=PARAMS, seed=7)
    with GenerationClient(h.address, store, backend="diffusers") as client:
        assert client.generator_id == "diffusers/tiny-sd@r0/float32/EulerDiscreteScheduler/t1"
        caps = client.capabilities  # a plain text-to-image pipeline
        assert (caps.layout, caps.max_references, caps.negative_prompt) == ("none", 0, True)
        img = client.generate(program)
        other = client.generate(program.model_copy(update={"seed": 8}))
        again = client.generate(program)
    assert not img.cached and img.seconds > 0 and again.cached
    assert _png_size(img.png) == (64, 64) and (img.width, img.height) == (64, 64)
    assert other.png != img.png  # the seed reaches the pipeline
    # the same frozen pipeline in-process reproduces the service's image bit for bit
    local = DiffusersGenerator(
        tiny_model,
        DiffusersSettings(
            model_name="tiny-sd",
            revision="r0",
            dtype="float32",
            device="cpu",
            scheduler="EulerDiscreteScheduler",
            intra_op_threads=1,
        ),
    ).generate(program)
    assert local.png == img.png


@pytest.mark.slow
def test_diffusers_weights_from_s3_prefix(
    tiny_model: Path, s3_server: Any, bucket: str, tmp_path: Path
) -> None:
    from services.generation.backends.diffusers_backend import DiffusersGenerator
    from services.generation.settings import GenerationSettings

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    for f in sorted(tiny_model.rglob("*")):
        if f.is_file():
            store.put(f"models/tiny-sd/{f.relative_to(tiny_model)}", f.read_bytes())
    settings = GenerationSettings(
        backend="diffusers",
        s3=s3_server.settings.model_copy(update={"bucket": bucket}),
        diffusers=DiffusersSettings(
            s3_prefix="models/tiny-sd", cache_dir=str(tmp_path), model_name="tiny-sd"
        ),
    )
    gen = DiffusersGenerator.from_settings(settings)
    program = Program(prompt="a blue dog", params=PARAMS, seed=1)
    from_s3 = gen.generate(program)
    local = DiffusersGenerator(tiny_model, DiffusersSettings(model_name="tiny-sd")).generate(
        program
    )
    assert from_s3.png == local.png
    assert gen.generator_id == f"diffusers/tiny-sd@local/float32/DDIMScheduler/t{gen.threads}"
    with pytest.raises(FileNotFoundError, match="s3_prefix"):
        DiffusersGenerator.from_settings(
            settings.model_copy(
                update={
                    "diffusers": settings.diffusers.model_copy(update={"s3_prefix": "models/none"})
                }
            )
        )


def test_bad_diffusers_settings_name_the_field(tmp_path: Path) -> None:
    from services.generation.backends.diffusers_backend import DiffusersGenerator

    with pytest.raises(ValueError, match="diffusers.model_path"):
        DiffusersGenerator(tmp_path)


LAYOUT = [
    LayoutItem(label="cat", box=(0.05, 0.1, 0.45, 0.9)),
    LayoutItem(label="dog", box=(0.55, 0.2, 0.95, 0.8)),
]


def _red_png(size: int = 48) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (size, size), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def test_generator_id_records_intra_op_threads(tiny_model: Path, torch_threads: int) -> None:
    from services.generation.backends.diffusers_backend import DiffusersGenerator

    gen = DiffusersGenerator(
        tiny_model, DiffusersSettings(model_name="tiny-sd", intra_op_threads=2)
    )
    assert gen.threads == 2 and gen.generator_id.endswith("/t2")
    with pytest.raises(ValueError, match="intra_op_threads"):
        DiffusersSettings(intra_op_threads=-1)
    with pytest.raises(ValueError, match="diffusers.intra_op_threads"):  # unvalidated settings
        DiffusersGenerator(tiny_model, DiffusersSettings.model_construct(intra_op_threads=-1))


def test_gligen_layout_reaches_the_pipeline(
    tiny_gligen: Path, tmp_path: Path, torch_threads: int
) -> None:
    from services.generation.backends.diffusers_backend import DiffusersGenerator
    from tests.fixtures.diffusers_spy import read_calls, spy_on

    spy = str(tmp_path / "calls.jsonl")
    gen = spy_on(
        DiffusersGenerator(
            tiny_gligen,
            DiffusersSettings(
                model_name="tiny-gligen", gligen_scheduled_sampling_beta=1.0, intra_op_threads=1
            ),
        ),
        spy,
    )
    assert gen.capabilities.layout == "adapter" and gen.capabilities.layout_attributes == ()
    program = Program(prompt="a cat and a dog", params=PARAMS, seed=3, layout=LAYOUT)
    laid_out = gen.generate(program)
    plain = gen.generate(program.model_copy(update={"layout": None}))
    with_layout, without = read_calls(spy)
    assert with_layout["gligen_phrases"] == ["cat", "dog"]
    assert with_layout["gligen_boxes"] == [list(i.box) for i in LAYOUT]
    assert with_layout["gligen_scheduled_sampling_beta"] == 1.0
    assert without["gligen_scheduled_sampling_beta"] == 0.0  # grounding off without a layout
    assert laid_out.png != plain.png  # the grounding tokens changed the denoising
    # colours are not honoured by GLIGEN: refused, not silently dropped
    with pytest.raises(ValueError, match="layout.color"):
        gen.generate(
            program.model_copy(update={"layout": [LAYOUT[0].model_copy(update={"color": "red"})]})
        )


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
def test_gligen_layout_and_img2img_reference_through_the_service(
    tiny_gligen: Path,
    tiny_model: Path,
    service_factory: Any,
    s3_server: Any,
    bucket: str,
    tmp_path: Path,
) -> None:
    from services.common.errors import FailedPrecondition
    from tests.fixtures.diffusers_spy import read_calls

    s3, env = s3_config(s3_server, bucket)
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    spy = str(tmp_path / "service-calls.jsonl")
    backend = "tests.fixtures.diffusers_spy:spy_generator"
    gligen = service_factory(
        "generation",
        {
            "backend": backend,
            "diffusers": {
                "model_path": str(tiny_gligen),
                "model_name": "tiny-gligen",
                "intra_op_threads": 1,
            },
            "s3": s3,
        },
        env={**env, "EVOHARNESS_TEST_SPY": spy},
    )
    img2img = service_factory(
        "generation",
        {
            "backend": backend,
            "diffusers": {
                "model_path": str(tiny_model),
                "model_name": "tiny-sd",
                "pipeline_class": "StableDiffusionImg2ImgPipeline",
                "intra_op_threads": 1,
            },
            "s3": s3,
        },
        env={**env, "EVOHARNESS_TEST_SPY": spy},
    )
    program = Program(prompt="a cat and a dog", params=PARAMS, seed=4, layout=LAYOUT)
    with GenerationClient(gligen.address, store) as client:
        assert client.capabilities.layout == "adapter"
        client.generate(program)
    [call] = read_calls(spy)
    assert call["gligen_phrases"] == ["cat", "dog"]
    assert call["gligen_boxes"] == [list(i.box) for i in LAYOUT]
    assert call["gligen_scheduled_sampling_beta"] == 0.3  # GLIGEN's default, from config

    ref = store.put_content(_red_png(), prefix="refs", suffix=".png")
    with_ref = Program(prompt="a red cat", params=PARAMS, seed=4, references=[ref])
    with GenerationClient(img2img.address, store) as client:
        caps = client.capabilities
        assert (caps.layout, caps.max_references) == ("none", 1)
        client.generate(with_ref)
        with pytest.raises(FailedPrecondition, match="references"):
            client.generate(with_ref.model_copy(update={"references": [ref, ref]}))
        with pytest.raises(FailedPrecondition, match="layout"):
            client.generate(program)
    call = read_calls(spy)[-1]
    assert call["strength"] == 0.8
    assert call["image"]["size"] == [64, 64] and call["image"]["pixel00"] == [200, 30, 30]


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
def test_gligen_layout_and_reference_through_kserve(
    tiny_gligen: Path,
    tiny_model: Path,
    service_factory: Any,
    s3_server: Any,
    bucket: str,
    tmp_path: Path,
) -> None:
    """The generation service (backend kserve) -> OIP v2 gRPC -> a real kserve.ModelServer
    wrapping the spied pipelines: layout arrives as the ``layout`` input, the reference as
    ``references`` image bytes the service read from S3."""
    import yaml

    from tests.fixtures.diffusers_spy import read_calls
    from tests.fixtures.oip import start_kserve

    s3, env = s3_config(s3_server, bucket)
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    ref = store.put_content(_red_png(32), prefix="refs", suffix=".png")
    cases = [
        (
            {"model_path": str(tiny_gligen), "model_name": "tiny-gligen"},
            Program(prompt="a cat and a dog", params=PARAMS, seed=5, layout=LAYOUT),
        ),
        (
            {
                "model_path": str(tiny_model),
                "model_name": "tiny-sd",
                "pipeline_class": "StableDiffusionImg2ImgPipeline",
            },
            Program(prompt="a red cat", params=PARAMS, seed=5, references=[ref]),
        ),
    ]
    calls = []
    for i, (diffusers_cfg, program) in enumerate(cases):
        spy = str(tmp_path / f"kserve-{i}.jsonl")
        cfg = tmp_path / f"kserve-{i}.yaml"
        cfg.write_text(yaml.safe_dump({"diffusers": {**diffusers_cfg, "intra_op_threads": 1}}))
        servers = start_kserve(
            "tests.fixtures.diffusers_spy:spy_generator",
            tmp_path / f"kserve-{i}.log",
            {"EVOHARNESS_CONFIG": str(cfg), "EVOHARNESS_TEST_SPY": spy},
        )
        server = next(servers)
        try:
            h = service_factory(
                "generation",
                {
                    "backend": "kserve",
                    "oip": {"url": server.grpc_url, "model_name": server.model_name},
                    "s3": s3,
                },
                env=env,
            )
            with GenerationClient(h.address, store, backend="kserve") as client:
                served = client.capabilities  # asked from the predictor
                img = client.generate(program)
            assert img.png.startswith(b"\x89PNG")
            calls.append((served, read_calls(spy)[-1]))
        finally:
            servers.close()
    (gligen_caps, gligen_call), (img2img_caps, img2img_call) = calls
    assert gligen_caps.layout == "adapter" and img2img_caps.max_references == 1
    assert gligen_call["gligen_phrases"] == ["cat", "dog"]
    assert gligen_call["gligen_boxes"] == [list(i.box) for i in LAYOUT]
    assert img2img_call["image"]["pixel00"] == [200, 30, 30]
