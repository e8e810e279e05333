"""Harness on disk and as canonical JSON.

Directory layout (one file per responsibility, skills as Markdown)::

    harness.yaml        schema_version, name, description
    policy.yaml
    tools.yaml
    middleware.yaml
    memory.yaml
    skills/<name>.md    YAML front matter (description, triggers, effects, priority) + body

``harness_id`` = sha256 of the RFC 8785 canonical JSON of the whole document. Loading an
older ``schema_version`` migrates it through ``MIGRATIONS`` or fails naming the version.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import frontmatter
import yaml
from pydantic import ValidationError

from evoharness.canonical import canonical_json, sha256_hex
from evoharness.harness.schema import SCHEMA_VERSION, Harness, Skill

SECTION_FILES = {
    "policy": "policy.yaml",
    "tools": "tools.yaml",
    "middleware": "middleware.yaml",
    "memory": "memory.yaml",
}


class HarnessError(ValueError):
    """A harness that cannot be loaded, migrated or validated. The message names the file
    or field."""


#: schema_version → function migrating a document of that version to version + 1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def migrate(doc: dict[str, Any], source: str = "<document>") -> dict[str, Any]:
    """Bring a harness document to ``SCHEMA_VERSION``.

    Raises ``HarnessError`` naming the version when no migration exists for it, or when the
    version is newer than this code understands.
    """
    version = doc.get("schema_version")
    if not isinstance(version, int):
        raise HarnessError(f"{source}: schema_version is missing or not an integer: {version!r}")
    if version > SCHEMA_VERSION:
        raise HarnessError(
            f"{source}: schema_version {version} is newer than this evoharness supports "
            f"({SCHEMA_VERSION}); upgrade evoharness"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise HarnessError(
                f"{source}: no migration from schema_version {version} to {version + 1}"
            )
        doc = step(dict(doc))
        version = doc["schema_version"]
    return doc


def got(err: Any) -> str:
    """`` (got <value>)`` for a pydantic error on a scalar input (so ``steps: true`` reads
    "Input should be a valid integer (got true)"), else ``""``."""
    value = err.get("input")
    if isinstance(value, bool | int | float | str) or value is None:
        return f" (got {json.dumps(value, ensure_ascii=False)[:80]})"
    return ""


Loc = tuple[str | int, ...]
#: Where a pydantic error location lies on disk (``file:line``), or None to name the
#: document's source.
Locate = Callable[[Loc], str | None]


def _without_tags(loc: Loc, doc: Any) -> Loc:
    """``loc`` without the tags pydantic adds for a discriminated union's member
    (``tools.tools.0.search.top_k`` → ``tools.tools.0.top_k``): a string that names no key of
    the document at that point and is the item's ``kind``."""
    out: list[str | int] = []
    node = doc
    for part in loc:
        if (
            isinstance(node, dict)
            and isinstance(part, str)
            and part not in node
            and node.get("kind") == part
        ):
            continue
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _format_validation(
    exc: ValidationError, source: str, locate: Locate | None = None, doc: Any = None
) -> str:
    parts = []
    for err in exc.errors():
        # a model validator's error about one of its items names it in ctx["at"]
        at = (err.get("ctx") or {}).get("at") or ()
        loc: Loc = _without_tags((*err["loc"], *at), doc)
        where = (locate(loc) if locate is not None else None) or source
        path = ".".join(str(p) for p in loc)
        parts.append(f"{where}: {path or '<root>'}: {err['msg']}{got(err)}")
    return "\n".join(parts)


def from_document(
    doc: dict[str, Any], source: str = "<document>", locate: Locate | None = None
) -> Harness:
    """Validate a (possibly older) harness document into a ``Harness``.

    Raises ``HarnessError`` listing every invalid field as ``source: path.to.field: message``
    (``locate`` may name the ``file:line`` a field came from instead of ``source``).
    """
    if not isinstance(doc, dict):
        raise HarnessError(f"{source}: a harness document must be a JSON object")
    doc = migrate(doc, source)
    try:
        return Harness.from_json_document(doc)
    except ValidationError as exc:
        raise HarnessError(_format_validation(exc, source, locate, doc)) from None
    except ValueError as exc:
        found = first_non_json(doc)
        if found is None:
            raise HarnessError(f"{source}: {exc}") from None
        loc, why = found
        where = (locate(loc) if locate is not None else None) or source
        raise HarnessError(f"{where}: {'.'.join(map(str, loc)) or '<root>'}: {why}") from None


def first_non_json(
    value: Any, loc: Loc = (), parents: tuple[int, ...] = ()
) -> tuple[Loc, str] | None:
    """``(location, reason)`` of the first value in ``value`` that JSON cannot hold (NaN or an
    infinite float — YAML's ``.nan``, ``1e999`` —, a non-string key, a YAML date or set, a
    container that contains itself through a recursive YAML alias), else None."""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return loc, "NaN is not a JSON number"
        if math.isinf(value):
            return loc, f"{value} (a number too large for a float) is not a JSON number"
        return None
    if isinstance(value, dict | list):
        if id(value) in parents:
            return loc, "refers to itself (a recursive YAML alias), which JSON cannot hold"
        inner = (*parents, id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict) and not isinstance(key, str):
                return loc, f"key {key!r} is not a string"
            found = first_non_json(item, (*loc, key), inner)
            if found is not None:
                return found
        return None
    return loc, f"a {type(value).__name__} ({value!r}) is not a JSON value"


def canonical_bytes(harness: Harness) -> bytes:
    """RFC 8785 canonical JSON bytes of the harness document."""
    return canonical_json(harness.to_document())


def harness_id(harness: Harness) -> str:
    """sha256 hex of the canonical JSON: the harness's content address."""
    return sha256_hex(canonical_bytes(harness))


def loads(data: bytes | str, source: str = "<json>") -> Harness:
    """Parse canonical (or any) JSON text into a ``Harness``. Raises ``HarnessError``."""
    try:
        doc = json.loads(data, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise HarnessError(f"{source}: invalid JSON: {exc}") from None
    return from_document(doc, source)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def yaml_error(path: Path, exc: yaml.YAMLError, what: str) -> HarnessError:
    """One-line ``path:line: invalid <what>: problem`` for a PyYAML error (its own message
    spans several lines)."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return HarnessError(f"{where}: invalid {what}: {detail}")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}: not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read: {exc.strerror or exc}") from None


class YamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads YAML 1.2 floats: PyYAML follows YAML 1.1, where
    ``1e-3`` (no dot) is the *string* "1e-3"; here it is the float 0.001, as in YAML 1.2's
    core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution) and in JSON.

    A key written twice in one mapping (a second ``params:`` block) raises
    ``yaml.constructor.ConstructorError`` at the second one, "duplicate key 'params' (first
    at line N)", where PyYAML would silently keep the last (YAML 1.2 requires unique keys).
    Keys brought in by a merge key (``<<: *anchor``) may still be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = (key_node.tag, key_node.value)
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        problem=f"duplicate key {key_node.value!r} (first at line {first[key]})",
                        problem_mark=key_node.start_mark,
                    )
                first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class YamlDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` with ``YamlLoader``'s float rule, so a string such as ``"0E0"`` or
    ``"1e-3"`` is written quoted and reads back as the same string (a dumper quotes exactly
    the plain scalars its resolver would read as another type). A string with leading or
    trailing whitespace of any kind (a no-break space too, which a plain scalar loses) is
    written double-quoted."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if value and value != value.strip():
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_str(value)


YamlDumper.add_representer(str, _represent_str)

_YAML12_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
for _cls in (YamlLoader, YamlDumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789"))


def load_yaml(text: str) -> Any:
    """Parse YAML text with ``YamlLoader`` (safe, YAML 1.2 floats). Raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=YamlLoader)  # noqa: S506 - YamlLoader is a SafeLoader


def _read_yaml(path: Path) -> Any:
    text = _read_text(path)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc, "YAML") from None


def _yaml_line(text: str, keys: Loc) -> int | None:
    """1-based line of ``keys`` in the YAML ``text``: the line of the deepest mapping key or
    sequence item the path reaches (keys that name nothing there, such as the tag pydantic
    puts in a tagged union's location, are skipped). None when the text does not parse.
    Lines are PyYAML's node marks (``yaml.compose``)."""
    try:
        node = yaml.compose(text, Loader=YamlLoader)  # noqa: S506 - YamlLoader is a SafeLoader
    except yaml.YAMLError:
        return None
    if node is None:
        return 1
    line = node.start_mark.line + 1
    for key in keys:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                    line, node = k.start_mark.line + 1, v
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            if 0 <= key < len(node.value):
                node = node.value[key]
                line = node.start_mark.line + 1
    return line


def _at(path: Path, text: str, keys: Loc) -> str:
    """``path:line`` of ``keys`` in ``path``'s YAML ``text`` (``_yaml_line``), else ``path``."""
    line = _yaml_line(text, keys)
    return f"{path}:{line}" if line is not None else str(path)


def _section_locator(root: Path, head: dict[str, Any]) -> Locate:
    """A ``Locate`` for a harness directory's document: a field of a section names its
    section file and line (``policy.extractor`` → ``policy.yaml:<line>``), a field of the
    head (``head``, what ``harness.yaml`` holds) ``harness.yaml``. Skills are located where
    they are validated (``load_dir``)."""
    files = {section: root / fname for section, fname in SECTION_FILES.items()}

    def locate(loc: Loc) -> str | None:
        if not loc:
            return None
        if loc[0] in files and files[str(loc[0])].is_file():
            f, keys = files[str(loc[0])], loc[1:]
        elif loc[0] in head:
            f, keys = root / "harness.yaml", loc
        else:
            return None
        try:
            return _at(f, _read_text(f), keys)
        except HarnessError:
            return str(f)

    return locate


def locate_field(root: str | os.PathLike[str], field_path: str) -> str | None:
    """``file:line`` of the dotted ``field_path`` of the harness directory ``root`` (as a
    ``HarnessCompileError.field`` and pydantic spell it): ``policy.template`` →
    ``policy.yaml:<line>``, ``tools.tools.1.route`` → ``tools.yaml:<line of that tool's
    route>``, ``skills.skills.0.effects.1.value`` → ``skills/<name>.md:<line>`` (the 0th skill
    file in name order, as ``load_dir`` reads them; the line in its front matter). ``path``
    alone when the line cannot be found; None when ``root`` is not a directory or the field
    names no file of it."""
    root = Path(root)
    if not root.is_dir():
        return None
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in field_path.split(".") if p]
    skill = parts[:2] == ["skills", "skills"] and len(parts) > 2 and isinstance(parts[2], int)
    if skill:
        files = sorted((root / "skills").glob("*.md")) if (root / "skills").is_dir() else []
        index = int(parts[2])
        if index >= len(files):
            return None
        f, keys = files[index], parts[3:]
    else:
        if not parts or parts[0] not in SECTION_FILES:
            return None
        f, keys = root / SECTION_FILES[str(parts[0])], parts[1:]
    if not f.is_file():
        return None
    try:
        text = _read_text(f)
        if skill:
            text = frontmatter.YAMLHandler().split(text)[0]
    except (HarnessError, ValueError):
        return str(f)
    return _at(f, text, tuple(keys))


def _refuse_unknown_files(root: Path) -> None:
    """Raise ``HarnessError`` naming the first file of a harness directory that is not part
    of the layout (``harness.yaml``, the section files, ``skills/*.md``): a misspelt
    ``polcy.yaml`` would otherwise be ignored and its section silently take the defaults.
    Hidden files (``.git``, ``.DS_Store``) are ignored."""
    known = {"harness.yaml", *SECTION_FILES.values()}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or entry.name in known:
            continue
        if entry.name == "skills" and entry.is_dir():
            for md in sorted(entry.iterdir()):
                if not md.name.startswith(".") and md.suffix != ".md":
                    raise HarnessError(
                        f"{md}: not a skill file (skills/ holds only <name>.md files)"
                    )
            continue
        close = difflib.get_close_matches(entry.name, [*sorted(known), "skills"], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise HarnessError(
            f"{entry}: unknown file in a harness directory (expected harness.yaml, "
            f"{', '.join(SECTION_FILES.values())}, skills/<name>.md){hint}"
        )


def load_dir(path: str | os.PathLike[str]) -> Harness:
    """Load a harness directory (see module docstring), or a single ``.json`` document.

    Raises ``HarnessError`` naming the file, line (where PyYAML's marks give it) and field of
    the first problem (``policy.yaml:3: policy.extractor: ...``); a section file that is
    empty or not a mapping, and a key written twice, are refused (never the defaults).
    """
    root = Path(path)
    if root.is_file() and root.suffix.lower() in (".yaml", ".yml", ".md"):
        raise HarnessError(
            f"{root}: give the harness directory ({root.parent}) or a .json document, "
            "not one of its files"
        )
    if root.is_file():
        try:
            data = root.read_bytes()
        except OSError as exc:
            raise HarnessError(f"{root}: cannot read: {exc.strerror or exc}") from None
        return loads(data, str(root))
    if not root.is_dir():
        raise HarnessError(f"{root}: no such harness directory")
    head_path = root / "harness.yaml"
    if not head_path.exists():
        raise HarnessError(f"{head_path}: missing (every harness directory needs it)")
    _refuse_unknown_files(root)
    head = _read_yaml(head_path) or {}
    if not isinstance(head, dict):
        raise HarnessError(f"{head_path}:1: must be a mapping, got {type(head).__name__}")
    doc: dict[str, Any] = dict(head)
    for section, fname in SECTION_FILES.items():
        fpath = root / fname
        if fpath.exists():
            value = _read_yaml(fpath)
            if value is None:
                raise HarnessError(
                    f"{fpath}: empty (no YAML mapping; a truncated file?); write the "
                    f"{section} section or delete the file to use its defaults"
                )
            if not isinstance(value, dict):
                raise HarnessError(f"{fpath}:1: must be a mapping, got {type(value).__name__}")
            doc[section] = value
    skills: list[dict[str, Any]] = []
    skills_dir = root / "skills"
    if skills_dir.is_dir():
        for md in sorted(skills_dir.glob("*.md")):
            text = _read_text(md)
            if not frontmatter.checks(text):
                raise HarnessError(f"{md}:1: no YAML front matter ('---' block with the name)")
            try:
                post = frontmatter.loads(text)
                # python-frontmatter silently drops a front matter that is not a mapping
                fm_text = frontmatter.YAMLHandler().split(text)[0]
                raw = load_yaml(fm_text)
            except yaml.YAMLError as exc:
                # python-frontmatter keeps the newline after the opening "---", so the
                # YAML's line numbers are already the file's
                raise yaml_error(md, exc, "front matter") from None
            if raw is not None and not isinstance(raw, dict):
                raise HarnessError(
                    f"{md}:2: front matter must be a mapping, got {type(raw).__name__}"
                )
            meta = dict(raw or {})  # read with YamlLoader (post.metadata: YAML 1.1 floats)
            meta.setdefault("name", md.stem)
            if meta["name"] != md.stem:
                where = _at(md, fm_text, ("name",))
                raise HarnessError(f"{where}: front matter name {meta['name']!r} != file name")
            meta["body"] = post.content
            if head.get("schema_version") == SCHEMA_VERSION:
                try:  # validated here too so that an error names the skill's file and line
                    Skill.model_validate(meta)
                except ValidationError as exc:

                    def in_front_matter(loc: Loc, md: Path = md, fm: str = fm_text) -> str | None:
                        # the body is not in the front matter: its errors name the file only
                        return None if loc[:1] == ("body",) else _at(md, fm, loc)

                    raise HarnessError(_format_validation(exc, str(md), in_front_matter)) from None
            skills.append(meta)
    if skills or skills_dir.is_dir():
        doc["skills"] = {"skills": skills}
    # an older schema_version is migrated first: its fields need not be where they were read
    current = head.get("schema_version") == SCHEMA_VERSION
    return from_document(doc, str(root), _section_locator(root, head) if current else None)


def _unicode_ok(value: Any) -> bool:
    """True when PyYAML writes ``value`` with raw Unicode and reads it back unchanged.

    PyYAML emits some characters raw that its reader then treats as line breaks (NEL
    U+0085, LINE/PARAGRAPH SEPARATOR U+2028/2029 in quoted scalars), which changes the text
    on load; such documents are written with escape sequences instead (found by the hypothesis
    round-trip test)."""
    text = yaml.dump(
        value, Dumper=YamlDumper, sort_keys=True, allow_unicode=True, default_flow_style=False
    )
    return bool(load_yaml(text) == value)


def _dump_yaml(value: Any) -> str:
    return yaml.dump(
        value,
        Dumper=YamlDumper,
        sort_keys=True,
        allow_unicode=_unicode_ok(value),
        default_flow_style=False,
    )


def save_dir(harness: Harness, path: str | os.PathLike[str]) -> Path:
    """Write ``harness`` as a directory, atomically: a temporary sibling directory is written
    and renamed over ``path``, so a failure leaves any previous contents intact.

    Raises ``HarnessError`` (and writes nothing) when ``path`` is a file or a non-empty
    directory without ``harness.yaml``, so a mistyped output path never replaces other data.

    Skills are written in priority-independent list order; loading sorts skill files by
    name, so ``save_dir`` orders skills by name too to keep load → save → load identical.
    """
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise HarnessError(f"{root}: exists and is not a directory; not overwritten")
    if root.is_dir() and any(root.iterdir()) and not (root / "harness.yaml").exists():
        raise HarnessError(
            f"{root}: a non-empty directory that is not a harness (no harness.yaml); "
            "not overwritten"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    doc = harness.to_document()
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", dir=root.parent))
    # mkdtemp creates 0700; give the directory the mode a plain mkdir() would
    mask = os.umask(0o022)
    os.umask(mask)
    tmp.chmod(0o777 & ~mask)
    try:
        head = {k: doc[k] for k in ("schema_version", "name", "description")}
        (tmp / "harness.yaml").write_text(_dump_yaml(head), encoding="utf-8")
        for section, fname in SECTION_FILES.items():
            (tmp / fname).write_text(_dump_yaml(doc[section]), encoding="utf-8")
        skills_dir = tmp / "skills"
        skills_dir.mkdir()
        for skill in sorted(doc["skills"]["skills"], key=lambda s: s["name"]):
            meta = {k: v for k, v in skill.items() if k != "body"}
            post = frontmatter.Post(skill["body"], **meta)
            text = frontmatter.dumps(
                post, Dumper=YamlDumper, sort_keys=True, allow_unicode=_unicode_ok(meta)
            )
            (skills_dir / f"{skill['name']}.md").write_text(text + "\n", encoding="utf-8")
        if root.exists():
            backup = root.with_name(f".{root.name}.old")
            shutil.rmtree(backup, ignore_errors=True)
            root.rename(backup)
            tmp.rename(root)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def normalized(harness: Harness) -> Harness:
    """The harness as it round-trips through a directory (skills ordered by name)."""
    skills = sorted(harness.skills.skills, key=lambda s: s.name)
    return harness.model_copy(
        update={"skills": harness.skills.model_copy(update={"skills": skills})}
    )


__all__ = [
    "HarnessError",
    "MIGRATIONS",
    "Skill",
    "canonical_bytes",
    "from_document",
    "harness_id",
    "load_dir",
    "loads",
    "locate_field",
    "migrate",
    "normalized",
    "save_dir",
]
