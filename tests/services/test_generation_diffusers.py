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


# --- IP-Adapter: several references on a text-to-image pipeline ---------------------------

IP_ADAPTER_WEIGHTS = "ip-adapter.safetensors"


def build_tiny_ip_adapter(
    model_dir: Path, out: Path, *, image_embed_dim: int = 32, token_dim: int | None = None
) -> Path:
    """Save, in ``out``, a random-weight IP-Adapter for the tiny pipeline in ``model_dir``
    (``IP_ADAPTER_WEIGHTS``: ``image_proj.*`` and ``ip_adapter.*`` keys, the layout
    ``load_ip_adapter`` reads from a ``.safetensors`` file) and a tiny
    ``CLIPVisionModelWithProjection`` (``image_encoder/``, projection dim 32, 32x32 pixels).

    The keys are those of diffusers' converters: ``image_proj.proj`` ([4 tokens x cross-attention
    dim, ``image_embed_dim``]) and ``image_proj.norm`` ([cross-attention dim]); for every
    cross-attention (``attn2``) processor of the UNet, in ``attn_processors`` order,
    ``ip_adapter.<1, 3, 5, ...>.to_k_ip`` / ``to_v_ip`` ([block channels, cross-attention dim]).
    ``image_embed_dim`` other than 32 gives an adapter that does not fit the image encoder;
    ``token_dim`` other than the UNet's cross-attention dim (32) one that does not fit the
    UNet."""
    import torch
    from diffusers import UNet2DConditionModel
    from safetensors.torch import save_file
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(1)
    unet = UNet2DConditionModel.from_pretrained(str(model_dir / "unet"))
    dim = token_dim or unet.config.cross_attention_dim
    channels = list(unet.config.block_out_channels)
    tensors = {
        "image_proj.proj.weight": torch.randn(4 * dim, image_embed_dim) * 0.5,
        "image_proj.proj.bias": torch.randn(4 * dim) * 0.5,
        "image_proj.norm.weight": torch.ones(dim),
        "image_proj.norm.bias": torch.zeros(dim),
    }
    key_id = 1
    for name in unet.attn_processors:
        if name.endswith("attn1.processor"):
            continue
        if name.startswith("mid_block"):
            hidden = channels[-1]
        elif name.startswith("up_blocks"):
            hidden = list(reversed(channels))[int(name[len("up_blocks.")])]
        else:
            hidden = channels[int(name[len("down_blocks.")])]
        for proj in ("to_k_ip", "to_v_ip"):
            tensors[f"ip_adapter.{key_id}.{proj}.weight"] = torch.randn(hidden, dim) * 0.5
        key_id += 2
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / IP_ADAPTER_WEIGHTS))
    CLIPVisionModelWithProjection(
        CLIPVisionConfig(
            hidden_size=32,
            projection_dim=32,
            intermediate_size=37,
            num_attention_heads=4,
            num_hidden_layers=2,
            image_size=32,
            patch_size=4,
        )
    ).save_pretrained(str(out / "image_encoder"))
    return out


@pytest.fixture(scope="module")
def tiny_ip_adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_ip_adapter(tiny_model, tmp_path_factory.mktemp("ip") / "ip-adapter")


def _png(colour: tuple[int, int, int], size: tuple[int, int] = (40, 24)) -> bytes:
    from PIL import Image, ImageDraw

    buf = io.BytesIO()
    im = Image.new("RGB", size, colour)
    ImageDraw.Draw(im).rectangle((4, 4, 16, 16), fill=(255 - colour[0], 90, 255 - colour[2]))
    im.save(buf, format="PNG")
    return buf.getvalue()


REF_PNGS = {
    "refs/red.png": _png((200, 30, 30)),
    "refs/blue.png": _png((20, 40, 220)),
    "refs/green.png": _png((30, 180, 60)),
    "refs/grey.png": _png((120, 120, 120)),
}


def _refs(*keys: str) -> list[Any]:
    from evoharness.canonical import sha256_hex
    from evoharness.program import ImageRef

    return [ImageRef(key=k, sha256=sha256_hex(REF_PNGS[k])) for k in keys]


def _ip_settings(adapter: Path, **extra: Any) -> DiffusersSettings:
    fields: dict[str, Any] = {
        "model_name": "tiny-sd",
        "intra_op_threads": 1,
        "ip_adapter_path": str(adapter),
        "ip_adapter_weight_name": IP_ADAPTER_WEIGHTS,
        "ip_adapter_max_references": 3,
    }
    return DiffusersSettings(**{**fields, **extra})


def test_ip_adapter_takes_several_references(
    tiny_model: Path, tiny_ip_adapter: Path, tmp_path: Path, torch_threads: int
) -> None:
    """Two and three references reach the pipeline as one adapter's ``ip_adapter_image``
    list, in program order, at the configured scale; changing one reference changes the
    image (same seed); more than ``ip_adapter_max_references`` is refused naming the limit."""
    from services.generation.backends.diffusers_backend import DiffusersGenerator
    from tests.fixtures.diffusers_spy import read_calls, spy_on

    spy = str(tmp_path / "calls.jsonl")
    gen = spy_on(
        DiffusersGenerator(
            tiny_model, _ip_settings(tiny_ip_adapter), fetch=lambda r: REF_PNGS[r.key]
        ),
        spy,
    )
    caps = gen.capabilities
    assert (caps.max_references, caps.reference_roles, caps.layout) == (
        3,
        ("subject", "style"),
        "none",
    )
    assert gen.generator_id == (
        f"diffusers/tiny-sd@local/float32/DDIMScheduler/t1/ip-adapter={IP_ADAPTER_WEIGHTS}@0.6"
    )
    base = Program(prompt="a cat", params=PARAMS, seed=11)

    def with_refs(*keys: str) -> Program:
        return base.model_copy(update={"references": _refs(*keys)})

    two = gen.generate(with_refs("refs/red.png", "refs/blue.png"))
    two_changed = gen.generate(with_refs("refs/red.png", "refs/green.png"))
    three = gen.generate(with_refs("refs/red.png", "refs/blue.png", "refs/green.png"))
    # the bytes the OIP predictors pass give the image fetching gives
    sent = gen.generate(
        with_refs("refs/red.png", "refs/blue.png"),
        reference_images=[REF_PNGS["refs/red.png"], REF_PNGS["refs/blue.png"]],
    )
    text_only = gen.generate(base)
    calls = read_calls(spy)
    assert [[im["pixel00"] for im in c["ip_adapter_image"][0]] for c in calls] == [
        [[200, 30, 30], [20, 40, 220]],
        [[200, 30, 30], [30, 180, 60]],
        [[200, 30, 30], [20, 40, 220], [30, 180, 60]],
        [[200, 30, 30], [20, 40, 220]],
        [[127, 127, 127]],  # the grey stand-in, weighted 0
    ]
    assert [len(c["ip_adapter_image"]) for c in calls] == [1] * 5  # one adapter
    assert calls[0]["ip_adapter_image"][0][0]["size"] == [40, 24]  # own size (CLIP resizes)
    assert [c["ip_adapter_scale"] for c in calls] == [[0.6]] * 4 + [[0.0]]
    assert all("image" not in c and "strength" not in c for c in calls)
    assert two.png != two_changed.png  # the second reference reaches the denoising
    assert three.png not in (two.png, two_changed.png)  # so does a third
    assert sent.png == two.png
    # without references the adapter is off: the plain text-to-image pipeline's image
    plain = DiffusersGenerator(
        tiny_model, DiffusersSettings(model_name="tiny-sd", intra_op_threads=1)
    )
    assert text_only.png == plain.generate(base).png
    four = with_refs("refs/red.png", "refs/blue.png", "refs/green.png", "refs/grey.png")
    assert caps.unsupported(four) == ["references"]
    before = len(read_calls(spy))
    with pytest.raises(
        ValueError, match=r"4 references; .* at most 3, diffusers.ip_adapter_max_references"
    ):
        gen.generate(four)
    assert len(read_calls(spy)) == before  # refused before the pipeline


def test_ip_adapter_errors_name_the_setting(
    tiny_model: Path, tiny_gligen: Path, tiny_ip_adapter: Path, tmp_path: Path, torch_threads: int
) -> None:
    """A missing weights file or image encoder, an adapter for another UNet or image encoder,
    and an adapter on an image-to-image or GLIGEN pipeline are refused at load naming the
    setting."""
    import shutil

    from services.generation.backends.diffusers_backend import DiffusersGenerator

    with pytest.raises(ValueError, match="diffusers.ip_adapter_weight_name: .*is not a file"):
        DiffusersGenerator(
            tiny_model, _ip_settings(tiny_ip_adapter, ip_adapter_weight_name="none.safetensors")
        )
    no_encoder = tmp_path / "no-encoder"
    no_encoder.mkdir()
    shutil.copy(tiny_ip_adapter / IP_ADAPTER_WEIGHTS, no_encoder)
    with pytest.raises(ValueError, match="diffusers.ip_adapter_image_encoder: .*config.json"):
        DiffusersGenerator(tiny_model, _ip_settings(no_encoder))
    other_unet = build_tiny_ip_adapter(tiny_model, tmp_path / "other-unet", token_dim=48)
    with pytest.raises(ValueError, match="diffusers.ip_adapter_weight_name: .*not an IP-Adapter"):
        DiffusersGenerator(tiny_model, _ip_settings(other_unet))
    other_encoder = build_tiny_ip_adapter(tiny_model, tmp_path / "other-enc", image_embed_dim=64)
    with pytest.raises(ValueError, match="diffusers.ip_adapter_image_encoder: .*do not fit"):
        DiffusersGenerator(tiny_model, _ip_settings(other_encoder))
    with pytest.raises(ValueError, match="diffusers.ip_adapter_path: .*image-to-image"):
        DiffusersGenerator(
            tiny_model,
            _ip_settings(tiny_ip_adapter, pipeline_class="StableDiffusionImg2ImgPipeline"),
        )
    with pytest.raises(ValueError, match="diffusers.ip_adapter_path: .*GLIGEN.* cannot take"):
        DiffusersGenerator(tiny_gligen, _ip_settings(tiny_ip_adapter))
    # a relative ip_adapter_path is read inside the model folder (an s3_prefix upload)
    with pytest.raises(ValueError, match="diffusers.ip_adapter_weight_name: .*tiny-sd/ip"):
        DiffusersGenerator(tiny_model, _ip_settings(Path("ip")))


def test_single_reference_img2img_is_unchanged(tiny_model: Path, torch_threads: int) -> None:
    """Without an IP-Adapter, an image-to-image pipeline takes one reference as its start
    image: the image equals diffusers' own img2img call on the reference resized to the
    program's size, strength 0.8; two references are refused."""
    import torch
    from diffusers import StableDiffusionImg2ImgPipeline
    from PIL import Image

    from services.generation.backends.diffusers_backend import DiffusersGenerator

    gen = DiffusersGenerator(
        tiny_model,
        DiffusersSettings(
            model_name="tiny-sd",
            intra_op_threads=1,
            pipeline_class="StableDiffusionImg2ImgPipeline",
        ),
        fetch=lambda r: REF_PNGS[r.key],
    )
    caps = gen.capabilities
    assert (caps.max_references, caps.reference_roles) == (1, ("init",))
    assert gen.generator_id == "diffusers/tiny-sd@local/float32/DDIMScheduler/t1"
    program = Program(prompt="a cat", params=PARAMS, seed=5, references=_refs("refs/red.png"))
    got = gen.generate(program)
    pipe = StableDiffusionImg2ImgPipeline.from_pretrained(str(tiny_model), local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    with Image.open(io.BytesIO(REF_PNGS["refs/red.png"])) as im:
        start = im.convert("RGB").resize((64, 64), Image.Resampling.LANCZOS)
    want = pipe(
        prompt="a cat",
        negative_prompt=None,
        image=start,
        strength=0.8,
        num_inference_steps=2,
        guidance_scale=3.0,
        generator=torch.Generator(device="cpu").manual_seed(5),
        output_type="pil",
    ).images[0]
    buf = io.BytesIO()
    want.save(buf, format="PNG")
    assert got.png == buf.getvalue()
    with pytest.raises(ValueError, match=r"references \(2 references; .* at most 1\)"):
        gen.generate(program.model_copy(update={"references": _refs("refs/red.png") * 2}))


#: The body of the KServe predictor test, run in a child process: ``kserve`` and
#: ``tritonclient`` register the same ``inference.*`` protobuf symbols, so importing both in
#: one process (the test session imports tritonclient for the Triton tests) fails.
_KSERVE_CHILD = """
import asyncio, sys
from pathlib import Path
import numpy as np
from kserve import InferInput, InferRequest
from evoharness.program import Program
from services.generation.backends.diffusers_backend import DiffusersGenerator
from services.generation.backends.kserve_predictor import GeneratorPredictor
from tests.services.test_generation_diffusers import PARAMS, REF_PNGS, _ip_settings, _refs

gen = DiffusersGenerator(Path(sys.argv[1]), _ip_settings(Path(sys.argv[2])))
keys = ("refs/red.png", "refs/blue.png", "refs/green.png")
program = Program(prompt="a cat", params=PARAMS, seed=2, references=_refs(*keys))
request = InferRequest(
    model_name="m",
    infer_inputs=[
        InferInput("program", [1], "BYTES", [program.model_dump_json().encode()]),
        InferInput("references", [3], "BYTES", [REF_PNGS[k] for k in keys]),
    ],
)
response = asyncio.run(GeneratorPredictor("m", gen).predict(request))
[image] = [o for o in response.outputs if o.name == "image"]
png = bytes(np.asarray(image.as_numpy()).reshape(-1)[0])
assert png == gen.generate(program, [REF_PNGS[k] for k in keys]).png, "not the generator's image"
other = [REF_PNGS[k] for k in keys[:2]] + [REF_PNGS["refs/grey.png"]]
assert png != gen.generate(program, other).png, "the third reference did not reach it"
print("ok")
"""


@pytest.mark.slow  # a child process loading torch and the pipeline: ~10 s (15-minute default run)
def test_ip_adapter_references_through_the_kserve_predictor(
    tiny_model: Path, tiny_ip_adapter: Path
) -> None:
    """The KServe predictor (no server; in a child process, see ``_KSERVE_CHILD``) passes
    every ``references`` element to the generator: three reference images give the image
    the generator makes from them, and a different third image gives another."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _KSERVE_CHILD, str(tiny_model), str(tiny_ip_adapter)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr


@pytest.mark.slow  # a generation service loading the pipeline: tens of seconds on 2 cores
def test_ip_adapter_references_through_the_service(
    tiny_model: Path,
    tiny_ip_adapter: Path,
    service_factory: Any,
    s3_server: Any,
    bucket: str,
    tmp_path: Path,
) -> None:
    """The generation service on an IP-Adapter deployment: Describe advertises the
    references, the backend reads three references from S3 (sha256-checked) and passes them
    all to the adapter; a fourth is refused with FAILED_PRECONDITION naming references."""
    from services.common.errors import FailedPrecondition
    from tests.fixtures.diffusers_spy import read_calls

    s3, env = s3_config(s3_server, bucket)
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    spy = str(tmp_path / "ip-calls.jsonl")
    h = service_factory(
        "generation",
        {
            "backend": "tests.fixtures.diffusers_spy:spy_generator",
            "diffusers": _ip_settings(tiny_ip_adapter, model_path=str(tiny_model)).model_dump(
                exclude_defaults=True
            ),
            "s3": s3,
        },
        env={**env, "EVOHARNESS_TEST_SPY": spy},
    )
    keys = ("refs/red.png", "refs/blue.png", "refs/green.png", "refs/grey.png")
    refs = [store.put_content(REF_PNGS[k], prefix="refs", suffix=".png") for k in keys]
    program = Program(prompt="a cat", params=PARAMS, seed=3, references=refs[:3])
    with GenerationClient(h.address, store) as client:
        caps = client.capabilities
        assert (caps.max_references, caps.reference_roles) == (3, ("subject", "style"))
        assert client.generator_id.endswith(f"/ip-adapter={IP_ADAPTER_WEIGHTS}@0.6")
        img = client.generate(program)
        with pytest.raises(FailedPrecondition, match="references"):
            client.generate(program.model_copy(update={"references": refs}))
    assert img.png.startswith(b"\x89PNG")
    [call] = read_calls(spy)
    assert [im["pixel00"] for im in call["ip_adapter_image"][0]] == [
        [200, 30, 30],
        [20, 40, 220],
        [30, 180, 60],
    ]
    assert call["ip_adapter_scale"] == [0.6]
