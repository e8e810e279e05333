"""Settings of the generation service (``configs/generation*.yaml`` + ``EVOHARNESS_*`` env).

The deployment, never the harness, chooses the backend and therefore the generator id.
Secrets (``openai.api_key``, S3 keys, the bearer token) come from the environment only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evoharness.capabilities import GeneratorCapabilities
from services.common.settings import ServiceSettings


class DiffusersSettings(BaseModel):
    """A ``diffusers.DiffusionPipeline`` loaded from ``model_path`` (a local folder in
    ``save_pretrained`` layout) or ``s3_prefix`` (that folder uploaded under a key prefix of
    the artifact bucket; downloaded once into ``cache_dir``). Never from a hub.

    ``model_name``/``revision`` name the weights in the generator id. ``dtype``: torch dtype
    name (float32, float16, bfloat16). ``device``: torch device (cpu, cuda, cuda:0).
    ``scheduler``: a diffusers scheduler class name (e.g. ``EulerDiscreteScheduler``) built
    from the pipeline's scheduler config; empty keeps the pipeline's own.
    ``pipeline_class``: a diffusers pipeline class name (``StableDiffusionGLIGENPipeline`` for
    layout, ``StableDiffusionImg2ImgPipeline`` for a reference image); empty = the folder's own.
    ``intra_op_threads``: torch intra-op threads set at load (0 = torch's default); CPU float
    results depend on it (pytorch#88718), so the generator id records it.
    ``gligen_scheduled_sampling_beta``: share of the denoising steps with the grounding
    tokens on (GLIGEN, Li et al. 2023, sec. 3.3; diffusers' default 0.3).
    ``reference_strength``: image-to-image strength (0..1, diffusers' default 0.8): how much
    of the reference's noise schedule is re-generated.

    IP-Adapter (Ye et al. 2023; ``pipe.load_ip_adapter``), for several references on a
    text-to-image pipeline: ``ip_adapter_path`` is a folder holding the adapter weights file
    ``ip_adapter_weight_name`` (``.safetensors`` with ``image_proj.*`` / ``ip_adapter.*`` keys,
    or a torch ``.bin`` of ``{"image_proj": ..., "ip_adapter": ...}``) and, unless the model
    folder has its own ``image_encoder``, the CLIP image encoder in
    ``ip_adapter_image_encoder`` (a ``CLIPVisionModelWithProjection`` in ``save_pretrained``
    layout, a folder relative to ``ip_adapter_path``). A relative ``ip_adapter_path`` is read
    inside the model folder (so an ``s3_prefix`` upload carries it); empty = no IP-Adapter.
    ``ip_adapter_scale``: the adapter's attention weight (0..2; 1.0 is the adapter as trained,
    lower leaves more to the prompt). ``ip_adapter_max_references``: how many reference images
    a program may carry (all go to the one adapter, each adding its image tokens).
    """

    model_config = ConfigDict(extra="forbid")

    model_path: str = ""
    s3_prefix: str = ""
    cache_dir: str = ""
    model_name: str = ""
    revision: str = "local"
    dtype: str = "float32"
    device: str = "cpu"
    scheduler: str = ""
    pipeline_class: str = ""
    intra_op_threads: int = Field(default=0, ge=0)
    gligen_scheduled_sampling_beta: float = Field(default=0.3, ge=0.0, le=1.0)
    reference_strength: float = Field(default=0.8, gt=0.0, le=1.0)
    ip_adapter_path: str = ""
    ip_adapter_weight_name: str = "ip-adapter_sd15.safetensors"
    ip_adapter_image_encoder: str = "image_encoder"
    ip_adapter_scale: float = Field(default=0.6, ge=0.0, le=2.0)
    ip_adapter_max_references: int = Field(default=4, ge=1, le=16)


class OpenAIImagesSettings(BaseModel):
    """An OpenAI-compatible images API (``POST {base_url}/images/generations``).

    ``api_key`` only from ``EVOHARNESS_OPENAI__API_KEY`` (or ``OPENAI_API_KEY``).
    ``response_format``: sent as is (``b64_json``; empty omits it, for models that always
    return base64, e.g. gpt-image-1). ``send_extra``: also send seed, negative_prompt, steps and guidance_scale as extra body
    fields (accepted by many OpenAI-compatible image servers; OpenAI itself ignores them).
    ``image_inputs``: how many reference images the endpoint accepts (``POST
    {base_url}/images/edits``, multipart ``image[]``; gpt-image-1 takes up to 16); 0 = the
    endpoint takes text only, and programs with references are refused.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-image-1"
    api_key: SecretStr = SecretStr("")
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    quality: str = ""
    response_format: str = "b64_json"
    send_extra: bool = True
    image_inputs: int = Field(default=0, ge=0, le=16)


class OIPSettings(BaseModel):
    """An Open Inference Protocol v2 server (KServe ModelServer or Triton) over gRPC:
    ``url`` host:port, ``model_name``, per-call ``timeout`` seconds, TLS options."""

    model_config = ConfigDict(extra="forbid")

    url: str = "127.0.0.1:8081"
    model_name: str = "evoharness-generator"
    timeout: float = Field(default=120.0, gt=0)
    ssl: bool = False
    root_certificates: str | None = None


class GenerationSettings(ServiceSettings):
    """Generation service settings.

    ``backend``: a name in ``services.generation.backends.BACKENDS`` or ``module:factory``
    (a callable taking these settings and returning a ``Generator``).
    ``generator_id``: override the backend's own id (deployment pins it; empty = backend's).
    ``key_prefix``: S3 prefix of the execution cache (``<prefix>/<key[:2]>/<key>.png`` and
    its record ``<key>.json``, ``evoharness.execution_cache``).
    ``max_image_bytes``: larger PNGs are refused (RESOURCE_EXHAUSTED), nothing stored.
    ``max_width``/``max_height``: the deployment's narrower bounds on params (pixels).
    ``max_concurrent_generations``: generator calls allowed at once (1 for a torch
    pipeline on one device; more for thread-safe backends such as remote OIP/OpenAI ones).
    ``sim_profile``: the embedded world's generator profile (``evoharness.sim.profiles``: a
    shipped name ``sd15-like`` / ``sdxl-like`` / ``flux-like``, or a YAML path); a deployment
    choice, never a harness's. ``sim``: ``SimParams`` fields overriding the profile's (empty =
    the profile as shipped); either changes the generator id.
    ``capabilities``: pin what the deployed generator honours
    (``evoharness.capabilities.GeneratorCapabilities`` fields; the Helm values set it for
    KServe/Triton deployments); None = what the backend declares.
    """

    backend: str = "sim"
    generator_id: str = ""
    key_prefix: str = "executions"
    max_image_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_width: int = Field(default=2048, ge=64)
    max_height: int = Field(default=2048, ge=64)
    max_concurrent_generations: int = Field(default=1, ge=1)
    sim_profile: str = "sdxl-like"
    sim: dict[str, Any] = Field(default_factory=dict)
    capabilities: GeneratorCapabilities | None = None
    diffusers: DiffusersSettings = Field(default_factory=DiffusersSettings)
    openai: OpenAIImagesSettings = Field(default_factory=OpenAIImagesSettings)
    oip: OIPSettings = Field(default_factory=OIPSettings)
