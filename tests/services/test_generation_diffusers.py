"""The diffusers backend through the generation service: a tiny Stable Diffusion pipeline
built from small configs with random weights (UNet2DConditionModel, AutoencoderKL,
CLIPTextModel, a CLIPTokenizer over a vocabulary written here), saved with
``save_pretrained``, loaded by the service from a local path and from an S3 prefix, never
from a hub."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from evoharness.program import GenerationParams, Program
from services.generation.client import GenerationClient
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import s3_config

PARAMS = GenerationParams(steps=2, guidance_scale=3.0, width=64, height=64)


def build_tiny_pipeline(out: Path) -> Path:
    """Save a tiny random-weight StableDiffusionPipeline to ``out`` and return it."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
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
    pipe = StableDiffusionPipeline(
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
def bucket(s3_server: Any) -> str:
    name = f"diff-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


def _png_size(png: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return im.size


def test_diffusers_backend_through_the_service(
    tiny_model: Path, service_factory: Any, s3_server: Any, bucket: str
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
            },
            "s3": s3,
        },
        env=env,
    )
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    program = Program(prompt="a red cube", negative_prompt="blurry", params=PARAMS, seed=7)
    with GenerationClient(h.address, store, backend="diffusers") as client:
        assert client.generator_id == "diffusers/tiny-sd@r0/float32/EulerDiscreteScheduler"
        img = client.generate(program)
        other = client.generate(program.model_copy(update={"seed": 8}))
        again = client.generate(program)
    assert not img.cached and img.seconds > 0 and again.cached
    assert _png_size(img.png) == (64, 64) and (img.width, img.height) == (64, 64)
    assert other.png != img.png  # the seed reaches the pipeline
    # the same frozen pipeline in-process reproduces the service's image bit for bit
    local = DiffusersGenerator(
        tiny_model, "tiny-sd", "r0", "float32", "cpu", "EulerDiscreteScheduler"
    ).generate(program)
    assert local.png == img.png


@pytest.mark.slow
def test_diffusers_weights_from_s3_prefix(
    tiny_model: Path, s3_server: Any, bucket: str, tmp_path: Path
) -> None:
    from services.generation.backends.diffusers_backend import DiffusersGenerator
    from services.generation.settings import DiffusersSettings, GenerationSettings

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
    local = DiffusersGenerator(tiny_model, "tiny-sd").generate(program)
    assert (
        from_s3.png == local.png
        and gen.generator_id == "diffusers/tiny-sd@local/float32/DDIMScheduler"
    )
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
