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
import io
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoharness.ports import GeneratedImage
from evoharness.program import Program

if TYPE_CHECKING:
    from services.generation.settings import DiffusersSettings, GenerationSettings
    from services.storage.s3 import S3ArtifactStore

_DTYPES = ("float32", "float16", "bfloat16")


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
        model_name, revision: identity of the weights (for the generator id).
        dtype: ``float32`` | ``float16`` | ``bfloat16``. device: torch device string.
        scheduler: diffusers scheduler class name built from the pipeline's scheduler
            config, or "" for the pipeline's own.

    Raises ``ValueError`` naming the setting for a bad dtype, scheduler, or missing folder.
    """

    def __init__(
        self,
        model_dir: str | Path,
        model_name: str = "",
        revision: str = "local",
        dtype: str = "float32",
        device: str = "cpu",
        scheduler: str = "",
        pipeline_class: str = "",
    ) -> None:
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
        )
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, settings: GenerationSettings, store: S3ArtifactStore | None = None
    ) -> DiffusersGenerator:
        """Build from the ``diffusers`` section; an ``s3_prefix`` is downloaded first (with
        ``store`` or one built from ``settings.s3``)."""
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
        return cls(
            model_dir,
            model_name=d.model_name,
            revision=d.revision,
            dtype=d.dtype,
            device=d.device,
            scheduler=d.scheduler,
            pipeline_class=d.pipeline_class,
        )

    @property
    def generator_id(self) -> str:
        """``diffusers/<model>@<revision>/<dtype>/<scheduler class>``."""
        return self._id

    def generate(self, program: Program) -> GeneratedImage:
        """Run the pipeline on ``program`` (layout and references are not used by a plain
        text-to-image pipeline). Deterministic per program on a given device. Raises
        ``TimeoutError`` when the caller's deadline passes between steps."""
        from services.common.server import check_deadline

        p = program.params

        def on_step_end(_pipe: Any, _step: int, _t: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
            check_deadline("diffusers denoising")
            return kwargs

        with self._lock:
            t0 = time.perf_counter()
            gen = self._torch.Generator(device="cpu").manual_seed(int(program.seed))
            out = self.pipe(
                prompt=program.prompt,
                negative_prompt=program.negative_prompt or None,
                num_inference_steps=p.steps,
                guidance_scale=p.guidance_scale,
                width=p.width,
                height=p.height,
                generator=gen,
                output_type="pil",
                callback_on_step_end=on_step_end,
            )
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
