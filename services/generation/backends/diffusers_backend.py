"""``DiffusersGenerator``: a ``diffusers.DiffusionPipeline`` as a frozen ``Generator``.

Weights load from a local folder in ``save_pretrained`` layout or from an S3 prefix of the
artifact bucket (downloaded once, atomically, into a cache folder) — never from a model hub
(``local_files_only=True``; ``HF_HUB_OFFLINE`` is set before import). dtype, device and
scheduler come from deployment config; steps, guidance scale, size, negative prompt and seed
from the program. The generator id names model, revision, dtype and scheduler.

References: an image-to-image pipeline takes one, as its start image; a text-to-image
pipeline with an IP-Adapter (``diffusers.ip_adapter_path``) takes several, all encoded by the
CLIP image encoder and attended to through the adapter (``ip_adapter_image``).

The caller's gRPC deadline is checked after every denoising step
(``callback_on_step_end``), so an abandoned request stops early and writes nothing.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoharness.capabilities import GeneratorCapabilities
from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, Program
from services.generation.settings import DiffusersSettings

if TYPE_CHECKING:
    from services.generation.settings import GenerationSettings
    from services.storage.s3 import S3ArtifactStore

_DTYPES = ("float32", "float16", "bfloat16")
#: GLIGEN's grounding tokens per image (``max_objs`` in diffusers' GLIGEN pipeline).
GLIGEN_MAX_BOXES = 30


def download_prefix(store: S3ArtifactStore, prefix: str, cache_dir: Path) -> Path:
    """Download every object under ``prefix`` into ``cache_dir/<sha256(bucket/prefix)[:16]>``
    and return that folder. Atomic: files go to a temporary sibling folder renamed into place
    when complete; an existing complete folder is reused. Raises ``FileNotFoundError`` when
    the prefix holds no objects."""
    prefix = prefix.strip("/") + "/"
    digest = hashlib.sha256(f"{store.bucket}/{prefix}".encode()).hexdigest()[:16]
    target = cache_dir / digest
    if (target / ".complete").is_file():
        return target
    keys = store.list_keys(prefix)
    if not keys:
        raise FileNotFoundError(f"diffusers.s3_prefix: s3://{store.bucket}/{prefix} is empty")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=cache_dir))
    try:
        for key in keys:
            dest = tmp / key[len(prefix) :]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(store.get(key))
        (tmp / ".complete").write_text("\n".join(keys))
        try:
            tmp.rename(target)
        except OSError:  # another process won the race; theirs is complete
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


class DiffusersGenerator:
    """A frozen diffusers pipeline.

    Args:
        model_dir: folder with ``model_index.json`` (``save_pretrained`` layout).
        settings: the ``diffusers`` section (``DiffusersSettings``; its ``model_path``,
            ``s3_prefix`` and ``cache_dir`` are ``from_settings``'s, not read here), of which:
        model_name, revision: identity of the weights (for the generator id).
        dtype: ``float32`` | ``float16`` | ``bfloat16``. device: torch device string.
        scheduler: diffusers scheduler class name built from the pipeline's scheduler
            config, or "" for the pipeline's own.
        pipeline_class: diffusers pipeline class name, or "" for the folder's own.
        intra_op_threads: ``torch.set_num_threads`` at load (0 = keep torch's count).
        gligen_scheduled_sampling_beta: GLIGEN's share of grounded steps (0..1).
        reference_strength: image-to-image strength (0..1].
        ip_adapter_path, ip_adapter_weight_name, ip_adapter_image_encoder: the IP-Adapter
            loaded onto a text-to-image pipeline (``DiffusersSettings``); its
            ip_adapter_scale and ip_adapter_max_references.
        fetch: reads a reference image's bytes (``S3ArtifactStore.get_ref``: sha256-checked);
            needed only by an image-conditioned pipeline.

    Raises ``ValueError`` naming the setting for a bad dtype, scheduler, or missing folder,
    and for an IP-Adapter that is missing, does not fit the pipeline (its UNet's attention or
    the image encoder), or is set on a pipeline that cannot take one (GLIGEN, image-to-image).
    """

    def __init__(
        self,
        model_dir: str | Path,
        settings: DiffusersSettings | None = None,
        *,
        fetch: Callable[[ImageRef], bytes] | None = None,
    ) -> None:
        d = settings or DiffusersSettings()
        model_name, revision, dtype, device = d.model_name, d.revision, d.dtype, d.device
        scheduler, pipeline_class, intra_op_threads = (
            d.scheduler,
            d.pipeline_class,
            d.intra_op_threads,
        )
        gligen_scheduled_sampling_beta, reference_strength = (
            d.gligen_scheduled_sampling_beta,
            d.reference_strength,
        )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import diffusers
        import torch

        model_dir = Path(model_dir)
        if not (model_dir / "model_index.json").is_file():
            raise ValueError(f"diffusers.model_path: {model_dir} has no model_index.json")
        if dtype not in _DTYPES:
            raise ValueError(f"diffusers.dtype: {dtype!r} is not one of {_DTYPES}")
        cls: Any = diffusers.DiffusionPipeline
        if pipeline_class:
            cls = getattr(diffusers, pipeline_class, None)
            if cls is None:
                raise ValueError(
                    f"diffusers.pipeline_class: {pipeline_class!r} is not in diffusers"
                )
        if intra_op_threads < 0:
            raise ValueError(f"diffusers.intra_op_threads: {intra_op_threads} is negative")
        if intra_op_threads:
            torch.set_num_threads(intra_op_threads)
        self.threads = torch.get_num_threads()
        self._torch = torch
        self.pipe: Any = cls.from_pretrained(
            str(model_dir), dtype=getattr(torch, dtype), local_files_only=True
        )
        self.ip_adapter = ""  # the loaded adapter's weight file name ("" = none)
        self.ip_adapter_scale = float(d.ip_adapter_scale)
        if d.ip_adapter_path:
            self._load_ip_adapter(model_dir, d)
        if scheduler:
            sched_cls = getattr(diffusers, scheduler, None)
            if sched_cls is None or not hasattr(sched_cls, "from_config"):
                raise ValueError(f"diffusers.scheduler: {scheduler!r} is not a diffusers scheduler")
            self.pipe.scheduler = sched_cls.from_config(self.pipe.scheduler.config)
        self.pipe.to(device)
        if hasattr(self.pipe, "set_progress_bar_config"):
            self.pipe.set_progress_bar_config(disable=True)
        self.device = device
        self.dtype = dtype
        self.scheduler_name = type(self.pipe.scheduler).__name__
        self._id = (
            f"diffusers/{model_name or model_dir.name}@{revision}/{dtype}/{self.scheduler_name}"
            f"/t{self.threads}"
        )
        if self.ip_adapter:
            self._id += f"/ip-adapter={self.ip_adapter}@{self.ip_adapter_scale:g}"
        self._lock = threading.Lock()
        self.fetch = fetch
        self.gligen_beta = float(gligen_scheduled_sampling_beta)
        self.reference_strength = float(reference_strength)
        self._call_params = set(inspect.signature(self.pipe.__call__).parameters)
        self.capabilities = pipeline_capabilities(
            self.pipe, ip_adapter_references=d.ip_adapter_max_references
        )
        if self.ip_adapter:
            self._check_ip_adapter(d)

    def _load_ip_adapter(self, model_dir: Path, d: DiffusersSettings) -> None:
        """``pipe.load_ip_adapter`` from ``d.ip_adapter_path`` (relative: inside
        ``model_dir``), local files only; before ``pipe.to(device)``, which moves the adapter,
        the image encoder and the UNet together. Raises ``ValueError`` naming the setting."""
        folder = Path(d.ip_adapter_path)
        if not folder.is_absolute():
            folder = model_dir / folder
        name = d.ip_adapter_weight_name
        params = set(inspect.signature(self.pipe.__call__).parameters)
        if not hasattr(self.pipe, "load_ip_adapter") or "ip_adapter_image" not in params:
            raise ValueError(
                f"diffusers.ip_adapter_path: {type(self.pipe).__name__} cannot take an "
                "IP-Adapter (use a text-to-image pipeline such as StableDiffusionPipeline)"
            )
        if "image" in params and "strength" in params:
            raise ValueError(
                f"diffusers.ip_adapter_path: {type(self.pipe).__name__} is image-to-image "
                "(its one reference is the start image); load the IP-Adapter on the "
                "text-to-image pipeline (diffusers.pipeline_class) for several references"
            )
        if not (folder / name).is_file():
            raise ValueError(
                f"diffusers.ip_adapter_weight_name: {folder / name} is not a file "
                f"(diffusers.ip_adapter_path {d.ip_adapter_path!r})"
            )
        encoder = folder / d.ip_adapter_image_encoder
        if (
            getattr(self.pipe, "image_encoder", None) is None
            and not (encoder / "config.json").is_file()
        ):
            raise ValueError(
                f"diffusers.ip_adapter_image_encoder: {encoder} has no config.json (a "
                "CLIPVisionModelWithProjection in save_pretrained layout), and the model "
                "folder has no image_encoder"
            )
        try:
            self.pipe.load_ip_adapter(
                str(folder),
                subfolder="",
                weight_name=name,
                image_encoder_folder=d.ip_adapter_image_encoder,
                local_files_only=True,
            )
        except (OSError, ValueError, RuntimeError, KeyError) as exc:
            raise ValueError(
                f"diffusers.ip_adapter_weight_name: {folder / name} is not an IP-Adapter for "
                f"this {type(self.pipe).__name__} ({type(exc).__name__}: {exc})"
            ) from exc
        self.ip_adapter = name

    def _check_ip_adapter(self, d: DiffusersSettings) -> None:
        """One grey image through the image encoder and the adapter's projection, so an
        encoder whose embeddings do not fit the adapter fails at load, naming the setting,
        rather than on the first program with a reference."""
        from PIL import Image

        pipe = self.pipe
        if not hasattr(pipe, "prepare_ip_adapter_image_embeds"):
            return
        try:
            with self._torch.no_grad():
                embeds = pipe.prepare_ip_adapter_image_embeds(
                    [[Image.new("RGB", (64, 64), (127, 127, 127))]], None, pipe.device, 1, True
                )
                pipe.unet.encoder_hid_proj(embeds)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(
                f"diffusers.ip_adapter_image_encoder: its image embeddings do not fit the "
                f"IP-Adapter {d.ip_adapter_weight_name} ({type(exc).__name__}: {exc})"
            ) from exc

    @classmethod
    def from_settings(
        cls, settings: GenerationSettings, store: S3ArtifactStore | None = None
    ) -> DiffusersGenerator:
        """Build from the ``diffusers`` section; an ``s3_prefix`` is downloaded first (with
        ``store`` or one built from ``settings.s3``)."""
        from services.generation.backends import reference_fetch

        d: DiffusersSettings = settings.diffusers
        if d.model_path:
            model_dir = Path(d.model_path)
        elif d.s3_prefix:
            from services.storage.s3 import S3ArtifactStore

            store = store or S3ArtifactStore.from_settings(settings.s3)
            cache = Path(d.cache_dir or Path(tempfile.gettempdir()) / "evoharness-models")
            model_dir = download_prefix(store, d.s3_prefix, cache)
        else:
            raise ValueError(
                "diffusers: set model_path or s3_prefix (weights never come from a hub)"
            )
        return cls(model_dir, d, fetch=reference_fetch(settings, store))

    @property
    def generator_id(self) -> str:
        """``diffusers/<model>@<revision>/<dtype>/<scheduler class>/t<intra-op threads>``."""
        return self._id

    def call_kwargs(
        self, program: Program, reference_images: Sequence[bytes] | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of the pipeline call for ``program`` (no generator or
        callback). Layout becomes GLIGEN phrases and boxes on a GLIGEN pipeline; the first
        reference image becomes ``image`` on an image-to-image one; with an IP-Adapter every
        reference image becomes ``ip_adapter_image`` (``[[image, ...]]``: one adapter, the
        images in program order, RGB at their own size; the CLIP feature extractor resizes
        them), and a program without references gets ``[[grey]]`` at adapter scale 0
        (``generate`` sets the scale). ``reference_images``: the images in program order, else
        fetched. Raises ``ValueError`` naming the field for conditioning this pipeline cannot
        honour (the service refuses it before), references beyond ``max_references`` with
        their count and the limit."""
        p = program.params
        missing = self.capabilities.unsupported(program)
        if missing:
            detail = ""
            if "references" in missing:
                detail = (
                    f" ({len(program.references or [])} references; this deployment takes "
                    f"at most {self.capabilities.max_references}"
                    + (", diffusers.ip_adapter_max_references" if self.ip_adapter else "")
                    + ")"
                )
            raise ValueError(
                f"program: this {type(self.pipe).__name__} cannot honour "
                f"{', '.join(missing)}{detail}"
            )
        kw: dict[str, Any] = {
            "prompt": program.prompt,
            "negative_prompt": program.negative_prompt or None,
            "num_inference_steps": p.steps,
            "guidance_scale": p.guidance_scale,
            "output_type": "pil",
        }
        if "width" in self._call_params:
            kw["width"], kw["height"] = p.width, p.height
        if self.capabilities.layout != "none":
            if program.layout:
                # each box's grounding phrase: its attributes and colour with its label
                # (LayoutItem.phrase; the bare label for a box without them)
                kw["gligen_phrases"] = [item.phrase() for item in program.layout]
                kw["gligen_boxes"] = [list(item.box) for item in program.layout]
                kw["gligen_scheduled_sampling_beta"] = self.gligen_beta
            else:
                # no layout: one empty phrase and box, grounding off from the first step
                # (GLIGEN's fuser is disabled after beta * steps steps; beta 0 = never on)
                kw["gligen_phrases"] = [""]
                kw["gligen_boxes"] = [[0.0, 0.0, 0.0, 0.0]]
                kw["gligen_scheduled_sampling_beta"] = 0.0
        if self.ip_adapter:
            from PIL import Image

            images = self._reference_images(program, reference_images)
            # no reference: a grey stand-in the UNet requires, weighted 0 (generate)
            kw["ip_adapter_image"] = [images or [Image.new("RGB", (64, 64), (127, 127, 127))]]
        elif self.capabilities.max_references:
            kw["strength"] = self.reference_strength
            kw["image"] = self._init_image(program, reference_images)
        return kw

    def _reference_images(
        self, program: Program, reference_images: Sequence[bytes] | None, limit: int | None = None
    ) -> list[Any]:
        """The program's reference images (the first ``limit``; all when None) as RGB PIL
        images at their own size: ``reference_images`` when given (their count must equal
        the program's references), else read with ``fetch``. Raises ``ValueError`` naming
        ``references`` for a count mismatch or when there is no way to read them."""
        from PIL import Image

        refs = (program.references or [])[:limit]
        if not refs:
            return []
        if reference_images is not None:
            if len(reference_images) != len(program.references or []):
                raise ValueError(
                    f"references: {len(reference_images)} images sent for "
                    f"{len(program.references or [])} references"
                )
            data = list(reference_images[: len(refs)])
        elif self.fetch is not None:
            data = [self.fetch(r) for r in refs]
        else:
            raise ValueError("references: this deployment has no artifact store to read them")
        out = []
        for raw in data:
            with Image.open(io.BytesIO(raw)) as im:
                out.append(im.convert("RGB"))
        return out

    def _init_image(self, program: Program, reference_images: Sequence[bytes] | None) -> Any:
        from PIL import Image

        p = program.params
        images = self._reference_images(program, reference_images, limit=1)
        if not images:
            # image-to-image with no reference: a neutral grey start, fully re-noised
            return Image.new("RGB", (p.width, p.height), (127, 127, 127))
        return images[0].resize((p.width, p.height), Image.Resampling.LANCZOS)

    def generate(
        self, program: Program, reference_images: Sequence[bytes] | None = None
    ) -> GeneratedImage:
        """Run the pipeline on ``program`` (see ``call_kwargs``). ``reference_images``: the
        program's reference images in order, when the caller already has them (the OIP
        predictor); else they are fetched. Deterministic per program for a generator id.
        Raises ``TimeoutError`` when the caller's deadline passes between steps."""
        from services.common.server import check_deadline

        kw = self.call_kwargs(program, reference_images)

        def on_step_end(_pipe: Any, _step: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
            check_deadline("diffusers denoising")
            return kwargs

        def on_step(_step: int, _t: Any, _latents: Any) -> None:
            check_deadline("diffusers denoising")

        if "callback_on_step_end" in self._call_params:
            kw["callback_on_step_end"] = on_step_end
        elif "callback" in self._call_params:  # older pipelines (GLIGEN)
            kw["callback"] = on_step
        with self._lock:
            if self.ip_adapter:  # the adapter is off (scale 0) for a program without references
                self.pipe.set_ip_adapter_scale(self.ip_adapter_scale if program.references else 0.0)
            t0 = time.perf_counter()
            gen = self._torch.Generator(device="cpu").manual_seed(int(program.seed))
            out = self.pipe(generator=gen, **kw)
            seconds = time.perf_counter() - t0
        image = out.images[0]
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return GeneratedImage(
            png=buf.getvalue(),
            generator_id=self._id,
            seconds=seconds,
            width=image.width,
            height=image.height,
        )


#: What an IP-Adapter takes from its references: the image prompt carries both the subject's
#: content and the style (Ye et al. 2023, IP-Adapter).
IP_ADAPTER_ROLES = ("subject", "style")


def ip_adapter_loaded(pipe: Any) -> bool:
    """Whether ``pipe`` has an IP-Adapter loaded (``load_ip_adapter`` replaced its UNet's
    ``encoder_hid_proj`` with a ``MultiIPAdapterImageProjection``) and an image encoder."""
    unet = getattr(pipe, "unet", None)
    proj = getattr(unet, "encoder_hid_proj", None)
    return (
        type(proj).__name__ == "MultiIPAdapterImageProjection"
        and getattr(pipe, "image_encoder", None) is not None
    )


def pipeline_capabilities(pipe: Any, ip_adapter_references: int = 4) -> GeneratorCapabilities:
    """What a loaded diffusers pipeline honours, from its ``__call__`` signature and modules.

    ``gligen_boxes`` -> layout ``adapter`` (labels only); a loaded IP-Adapter
    (``ip_adapter_loaded``) -> ``ip_adapter_references`` references (the deployment's
    ``diffusers.ip_adapter_max_references``), roles ``subject`` and ``style``; else ``image``
    + ``strength`` (image-to-image) -> one reference, role ``init``; ``negative_prompt`` ->
    negative prompt; the tokenizer's ``model_max_length`` -> ``max_prompt_tokens`` (77 for
    CLIP). Always seedable.
    """
    params = set(inspect.signature(pipe.__call__).parameters)
    tokenizer = getattr(pipe, "tokenizer", None)
    max_tokens = int(getattr(tokenizer, "model_max_length", 77) or 77)
    if max_tokens > 100_000:  # transformers' "no limit" sentinel
        max_tokens = 77
    image_conditioned = "image" in params and "strength" in params
    roles: tuple[str, ...] = ("init",) if image_conditioned else ()
    max_references = 1 if image_conditioned else 0
    if "ip_adapter_image" in params and ip_adapter_loaded(pipe):
        max_references, roles = ip_adapter_references, IP_ADAPTER_ROLES
    return GeneratorCapabilities(
        layout="adapter" if "gligen_boxes" in params else "none",
        layout_attributes=(),
        max_references=max_references,
        reference_roles=roles,
        negative_prompt="negative_prompt" in params,
        max_prompt_tokens=max_tokens,
        seedable=True,
    )
