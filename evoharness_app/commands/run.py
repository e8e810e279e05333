"""``evoharness run``: one prompt through a harness with the embedded backends.

Writes into ``--out``: ``image.png`` (the selected image), ``program.json`` (its program),
``trace.json`` (every decision, a JSON list) and ``result.json`` (all programs, the extracted
constraints, evidence, score and cost). Each file is written to a temporary name and renamed.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

import typer

from evoharness.ports import ArtifactStore, Generator, Verifier, store_fetch
from evoharness.program import MAX_SEED
from evoharness.tasks.io import TaskFileError, atomic_write_bytes, refuse_missing_parent
from evoharness.tasks.models import MAX_PROMPT_CHARS, check_prompt_length


def build_backends(
    generator: str = "sim", verify: bool = False, store: ArtifactStore | None = None
) -> tuple[Generator, Verifier | None]:
    """The generator and (when ``verify``) verifier for ``generator``; ``store``: where the
    generator reads references that name a bucket (the reference library's images).

    Only ``"sim"`` is embedded: ``SimGenerator`` and ``SimInspector`` (the CPU world). Raises
    ``ValueError`` naming the option for any other value (remote backends are added here)."""
    if generator != "sim":
        raise ValueError(f"--generator {generator!r}: only 'sim' is embedded")
    from evoharness.sim import SimGenerator

    verifier: Verifier | None = None
    if verify:
        from evoharness.sim import SimInspector

        verifier = SimInspector()
    return SimGenerator(fetch=store_fetch(store) if store is not None else None), verifier


#: What ``run`` writes into ``--out``: a folder holding only these (or some of them, an
#: interrupted run) is a previous run's output, which a new run replaces.
RUN_FILES = ("image.png", "program.json", "trace.json", "result.json")


def foreign_entries(out: Path) -> list[str]:
    """Names in the folder ``out`` that a previous ``run`` did not write (sorted; empty when
    ``out`` is missing, empty, or holds only ``RUN_FILES`` as plain files and their
    temporary siblings; a folder or link under one of those names is foreign)."""
    if not out.is_dir():
        return []
    return sorted(
        p.name
        for p in out.iterdir()
        if not (p.name in RUN_FILES and p.is_file() and not p.is_symlink())
        and not (p.name.startswith(tuple(f".{f}." for f in RUN_FILES)) and p.suffix == ".tmp")
    )


def _write(path: Path, data: bytes) -> None:
    # temp file + rename, with the mode a plain open() would give (not mkstemp's 0600)
    atomic_write_bytes(path, data)


def _write_out(out: Path, name: str, data: bytes) -> None:
    """``_write`` of ``out / name``; an ``OSError`` (a folder in the way, no permission)
    becomes the CLI's input error naming the path."""
    from evoharness_app.cli import InputError

    path = out / name
    try:
        _write(path, data)
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write {path.name}: {exc.strerror or exc}") from None


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def trace_warnings(trace: list[dict[str, Any]]) -> list[str]:
    """One ``warning:`` line per distinct thing the run's ``trace`` records that the user did
    not ask for: a step whose ``extractor`` or ``planner`` says ``"... (fallback: ...)"`` (the
    harness asked for an LLM this command does not have, so rules ran instead), each note of
    the agent's record (a tool not offered, the LLM backend replaced by rules) and each
    conditioning the generator does not honour (a ``capability_drop``). Empty when none."""
    lines: list[str] = []
    for t in trace:
        if t.get("step") == "capability_drop" and t.get("dropped"):
            for what in t["dropped"]:
                if what == "references" and "references_given" in t:
                    kept, given = t["references_kept"], t["references_given"]
                    text = (
                        f"the generator takes at most {kept} reference(s): "
                        f"{given - kept} of {given} dropped"
                    )
                else:
                    text = f"the generator does not honour {what}: dropped"
                lines.append(f"warning: {text} (see trace.json)")
        if t.get("step") == "agent":
            for note in t.get("notes") or []:
                hint = " (pass --library embedded)" if "no reference library" in note else ""
                line = f"warning: {t['responsibility']}/agent: {note}{hint} (see trace.json)"
                if line not in lines:
                    lines.append(line)
        for key in ("extractor", "planner"):
            used = t.get(key)
            if isinstance(used, str) and "(fallback:" in used:
                line = (
                    f"warning: {t['responsibility']}/{t['step']}: the harness asks for an llm "
                    f"{key}; ran {used!r} instead (see trace.json)"
                )
                if line not in lines:
                    lines.append(line)
    return lines


def register(app: typer.Typer) -> None:
    """Register the ``run`` verb on ``app``."""

    @app.command("run")
    def run(
        harness: Path = typer.Option(..., "--harness", help="Harness directory (or .json)."),
        prompt: str = typer.Option(
            ..., "--prompt", help=f"The request's prompt (at most {MAX_PROMPT_CHARS} characters)."
        ),
        seed: int = typer.Option(
            0,
            "--seed",
            min=0,
            max=MAX_SEED,
            help="Generator seed (0 .. 2^53-1, exact in canonical JSON).",
        ),
        out: Path = typer.Option(
            ..., "--out", help="Output directory (created; its parent must exist)."
        ),
        references: list[Path] = typer.Option(
            [], "--references", help="Reference image file(s) carried by the request."
        ),
        verify: bool | None = typer.Option(
            None,
            "--verify/--no-verify",
            help="Use the verifier (default: when the harness's middleware verifies).",
        ),
        generator: str = typer.Option("sim", "--generator", help="Generator backend (sim)."),
        library: str = typer.Option(
            "",
            "--library",
            help="Reference library of the agent's image_search: 'embedded' (the embedded "
            "library, built into a temporary folder, about 2 s); default none.",
        ),
        force: bool = typer.Option(
            False,
            "--force",
            help="Write into an --out that holds other files than a previous run's "
            "(they are left as they are).",
        ),
    ) -> None:
        """Render one image for a prompt with a harness; write the results into OUT.

        OUT receives image.png, program.json, trace.json and result.json; an OUT holding
        other files is refused (a previous run's four files are replaced) unless --force."""
        from evoharness.harness.io import HarnessError, harness_id, load_dir, locate_field
        from evoharness.local_store import LocalArtifactStore
        from evoharness.program import ImageRef
        from evoharness.runtime import HarnessCompileError, HarnessRuntime
        from evoharness.runtime.harness_checks import harness_warnings
        from evoharness.runtime.tool_backends import ToolBackends
        from evoharness.sim.reference_library import EMBEDDED, open_library
        from evoharness_app.cli import InputError

        try:
            check_prompt_length(prompt)
        except ValueError as exc:
            raise InputError(f"--prompt: {exc}") from None
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as exc:  # argv bytes that are not UTF-8 arrive as surrogates
            bad = (
                ord(prompt[exc.start]) - 0xDC00
                if "\udc80" <= prompt[exc.start] <= "\udcff"
                else None
            )
            what = f"byte 0x{bad:02x}" if bad is not None else f"{prompt[exc.start]!r}"
            raise InputError(
                f"--prompt: not UTF-8 ({what} at character {exc.start}); give the prompt in UTF-8"
            ) from None
        try:
            h = load_dir(harness)
        except HarnessError as exc:
            raise InputError(str(exc)) from None
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out}: exists and is not a directory")
        try:
            refuse_missing_parent(out, "--out")
        except TaskFileError as exc:
            raise InputError(str(exc)) from None
        if harness.is_dir() and (
            out.resolve() == harness.resolve() or harness.resolve() in out.resolve().parents
        ):
            raise InputError(
                f"--out {out}: is the harness directory {harness} or inside it (a harness "
                "holds only its own files); choose another folder (nothing written)"
            )
        others = foreign_entries(out)
        if others and not force:
            more = f" and {len(others) - 5} more" if len(others) > 5 else ""
            shown = ", ".join(others[:5]) + more
            raise InputError(
                f"--out {out}: not empty and not a previous run's output (holds {shown}); "
                "choose an empty or new folder, or pass --force to write into it (nothing written)"
            )
        refs = []
        for r in references:
            if not r.is_file():
                what = "a directory, not an image file" if r.is_dir() else "no such file"
                raise InputError(f"--references {r}: {what}")
            refs.append(ImageRef(key=str(r.resolve())))
        if verify is None:
            verify = any(s.kind in ("verify_and_repair", "best_of_n") for s in h.middleware.stages)
        if library not in ("", EMBEDDED):
            raise InputError(f"--library {library!r}: only {EMBEDDED!r} (or none)")
        searches = any(t.kind == "image_search" and t.enabled for t in h.tools.tools)
        tmp = (  # built only for a harness that searches it
            tempfile.TemporaryDirectory(prefix="evoharness-library-")
            if library and searches
            else None
        )
        store = LocalArtifactStore(tmp.name) if tmp is not None else None
        try:
            gen, ver = build_backends(generator, verify, store)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        try:
            tools = ToolBackends(
                reference_library=open_library(store, EMBEDDED) if store is not None else None
            )
            rt = HarnessRuntime(h, gen, ver, tools=tools)
            res = rt.run(prompt, seed, refs or None)
        except HarnessCompileError as exc:
            raise InputError(f"{locate_field(harness, exc.field) or harness}: {exc}") from None
        except ValueError as exc:
            raise InputError(str(exc)) from None
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"--out {out}: cannot create: {exc.strerror or exc}") from None
        _write_out(out, "image.png", res.image.png)
        _write_out(
            out, "program.json", _json(res.program.model_dump(mode="json", exclude_none=True))
        )
        _write_out(out, "trace.json", _json(res.trace))
        result = {
            "harness_id": harness_id(h),
            "prompt": prompt,
            "seed": seed,
            "generator_id": res.image.generator_id,
            "selected": res.selected,
            "programs": [p.model_dump(mode="json", exclude_none=True) for p in res.programs],
            "constraints": [c.model_dump(mode="json", exclude_none=True) for c in res.constraints],
            "evidence": [e.model_dump(mode="json") for e in res.evidence],
            "score": res.score,
            "cost": dataclasses.asdict(res.cost),
        }
        _write_out(out, "result.json", _json(result))
        if tmp is not None:
            tmp.cleanup()
        for field, message in harness_warnings(h):
            typer.echo(f"warning: {locate_field(harness, field) or harness}: {message}", err=True)
        for line in trace_warnings(res.trace):
            typer.echo(line, err=True)
        score = "" if res.score is None else f", score {res.score:.2f}"
        typer.echo(
            f"wrote {out / 'image.png'} ({len(res.programs)} generation(s){score}); "
            f"trace in {out / 'trace.json'}"
        )
