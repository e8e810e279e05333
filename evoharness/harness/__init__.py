"""Harness model: schema, boundary contracts, canonical JSON + sha256, patch application."""

from evoharness.harness.io import (
    HarnessError,
    canonical_bytes,
    from_document,
    harness_id,
    load_dir,
    loads,
    save_dir,
)
from evoharness.harness.patch import CONTRACTS, Patch, PatchError, apply_patch, diff
from evoharness.harness.schema import SCHEMA_VERSION, Harness, Responsibility

__all__ = [
    "CONTRACTS",
    "SCHEMA_VERSION",
    "Harness",
    "HarnessError",
    "Patch",
    "PatchError",
    "Responsibility",
    "apply_patch",
    "canonical_bytes",
    "diff",
    "from_document",
    "harness_id",
    "load_dir",
    "loads",
    "save_dir",
]
