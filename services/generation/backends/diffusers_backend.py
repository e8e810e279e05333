"""``DiffusersGenerator``: a ``diffusers.DiffusionPipeline`` as a frozen ``Generator``.

Weights load from a local folder in ``save_pretrained`` layout or from an S3 prefix of the
artifact bucket (downloaded once, atomically, into a cache folder) — never from a model hub
(``local_files_only=True``; ``HF_HUB_OFFLINE`` is set before import). dtype, device and
scheduler come from deployment config; steps, guidance scale, size, negative prompt and seed
from the program. The generator id names model, revision, dtype and scheduler.

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
        fetch: reads a reference image's bytes (``S3ArtifactStore.get_ref``: sha256-checked);
            needed only by an image-conditioned pipeline.

    Raises ``ValueError`` naming the setting for a bad dtype, scheduler, or missing folder.
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
        self._lock = threading.Lock()
        self.fetch = fetch
        self.gligen_beta = float(gligen_scheduled_sampling_beta)
        self.reference_strength = float(reference_strength)
        self._call_params = set(inspect.signature(self.pipe.__call__).parameters)
        self.capabilities = pipeline_capabilities(self.pipe)

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
        reference image becomes ``image`` on an image-conditioned one (``reference_images``
        in program order, else fetched). Raises ``ValueError`` naming the field for
        conditioning this pipeline cannot honour (the service refuses it before)."""
        p = program.params
        missing = self.capabilities.unsupported(program)
        if missing:
            raise ValueError(
                f"program: this {type(self.pipe).__name__} cannot honour {', '.join(missing)}"
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
        if self.capabilities.max_references:
            kw["strength"] = self.reference_strength
            kw["image"] = self._init_image(program, reference_images)
        return kw

    def _init_image(self, program: Program, reference_images: Sequence[bytes] | None) -> Any:
        from PIL import Image

        p = program.params
        refs = program.references or []
        if not refs:
            # image-to-image with no reference: a neutral grey start, fully re-noised
            return Image.new("RGB", (p.width, p.height), (127, 127, 127))
        if reference_images is not None:
            if len(reference_images) != len(refs):
                raise ValueError(
                    f"references: {len(reference_images)} images sent for {len(refs)} references"
                )
            data = reference_images[0]
        elif self.fetch is not None:
            data = self.fetch(refs[0])
        else:
            raise ValueError("references: this deployment has no artifact store to read them")
        with Image.open(io.BytesIO(data)) as im:
            return im.convert("RGB").resize((p.width, p.height), Image.Resampling.LANCZOS)

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


def pipeline_capabilities(pipe: Any) -> GeneratorCapabilities:
    """What a loaded diffusers pipeline honours, from its ``__call__`` signature.

    ``gligen_boxes`` -> layout ``adapter`` (labels only); ``image`` + ``strength`` (image-to-
    image) -> one reference; ``negative_prompt`` -> negative prompt; the tokenizer's
    ``model_max_length`` -> ``max_prompt_tokens`` (77 for CLIP). Always seedable.
    """
    params = set(inspect.signature(pipe.__call__).parameters)
    tokenizer = getattr(pipe, "tokenizer", None)
    max_tokens = int(getattr(tokenizer, "model_max_length", 77) or 77)
    if max_tokens > 100_000:  # transformers' "no limit" sentinel
        max_tokens = 77
    image_conditioned = "image" in params and "strength" in params
    return GeneratorCapabilities(
        layout="adapter" if "gligen_boxes" in params else "none",
        layout_attributes=(),
        max_references=1 if image_conditioned else 0,
        reference_roles=("init",) if image_conditioned else (),
        negative_prompt="negative_prompt" in params,
        max_prompt_tokens=max_tokens,
        seedable=True,
    )
