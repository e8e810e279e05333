"""What the simulator draws: a program read into a list of items (objects, text panels,
reference images) with the mistakes real generators make (steps 1–9 of
``evoharness.sim.generator``'s docstring: token limit, colour, texture and shape binding,
counting, relations, negation, text corruption, palette words, missed objects, layout boxes).

Every random draw is keyed (``evoharness.sim.draws.Draws``); where the items go is
``evoharness.sim.placement``, how they are painted ``evoharness.sim.generator``. Imports only
numpy, Pillow, pydantic and the evoharness core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from evoharness.program import Program
from evoharness.sim import library
from evoharness.sim.draws import Draws
from evoharness.sim.params import SimParams
from evoharness.sim.reader import Reading, class_names_in, palette_of, read_prompt
from evoharness.sim.subject import Subject, read_subject
from evoharness.tasks.models import DEPTH_RELATIONS, PROXIMITY_RELATIONS
from evoharness.vocab import COLORS

#: Layout labels that mean "a sign panel with this item's text" rather than an object class.
TEXT_LABELS = frozenset({"text", "sign", "panel", "board", "label", "signboard"})
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGITS = "0123456789"
_OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
#: Depth (issue 19, "behind" / "in front of"): the back object is placed at ``DEPTH_SCALE`` of
#: the front object's size (long side) and drawn first; the front object's box covers ``DEPTH_OCCLUSION`` (drawn
#: uniformly) of the back object's box, offset diagonally downwards (left or right), so the
#: front sticker hides part of the back one. Farther is smaller and higher in a photograph.
DEPTH_SCALE = 0.7
DEPTH_OCCLUSION = (0.25, 0.45)


def _substitute(ch: str, u: float) -> str:
    """A corrupted character: a random letter for a letter, a random digit for a digit."""
    pool = _DIGITS if ch.isdigit() else _LETTERS
    return pool[min(len(pool) - 1, int(u * len(pool)))]


def _pick(options: list[Any], u: float) -> Any:
    return options[min(len(options) - 1, int(u * len(options)))]


@dataclass(frozen=True)
class Palette:
    """The colours a palette / style word of the prompt imposes (``reader.palette_of``) and
    the chance ``p`` that it overrides one object's or box's colour (0: none)."""

    colours: tuple[str, ...] = ()
    p: float = 0.0


@dataclass
class Item:
    """One thing to draw, as planned: an object sticker, a text panel or a reference image;
    ``box`` is set by placement (``evoharness.sim.placement``), the depth fields by
    ``plan_depth``."""

    kind: str  # "object" | "panel" | "reference"
    key: tuple[Any, ...] = ()
    cls: str | None = None
    color: str | None = None
    text: str | None = None
    intended: str | None = None
    quoted: bool = True
    source: str = "prompt"
    aspect: float = 1.0
    box: tuple[int, int, int, int] | None = None  # pixels x0, y0, x1, y1
    region: tuple[float, float, float, float] | None = None  # allowed centre region (fractions)
    image: Image.Image | None = None
    ref_index: int = -1
    pasted: bool = False
    texture: str | None = None  # a ``vocab.TEXTURES`` name painted on the body
    shape: str | None = None  # a ``vocab.SHAPES`` name outlined around the sticker
    scale: float = 1.0  # size factor of the placement (``DEPTH_SCALE`` for a back object)
    over: Item | None = None  # the back object this one is drawn overlapping (depth)
    front: Item | None = None  # the front object of this back object (depth)
    occlusion: float = 0.0  # share of ``over``'s box this one's box covers
    overlapping: bool = False  # placed overlapping ``over`` (else there was no room)


@dataclass
class ReferenceOutcome:
    """What the world did with one program reference (``plan_references``; the manifest's
    ``reference_outcomes``, tests and benches only): ``index`` (0-based), ``phrase`` (the
    bound phrase's class, None: unmentioned), ``subject`` (read from the pixels; None: no
    subject the world knows), ``outcome`` (``drawn``, ``omitted``, ``ignored``: unmentioned
    and not drawn, ``card``: pasted whole), and the failure flags."""

    index: int
    phrase: str | None
    subject: Subject | None
    outcome: str
    duplicated: bool = False
    glyph_beside: bool = False
    pasted: bool = False
    items: list[Item] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The manifest entry (JSON-ready)."""
        sub = self.subject
        return {
            "index": self.index,
            "phrase": self.phrase,
            "subject": None
            if sub is None
            else {"class": sub.cls, "color": sub.color, "texture": sub.texture, "pose": sub.pose},
            "outcome": self.outcome,
            "duplicated": self.duplicated,
            "glyph_beside": self.glyph_beside,
            "pasted": self.pasted,
        }


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def text_rate(p: SimParams, n_chars: int, f: float, guidance: float) -> float:
    """Per-character corruption rate of a text of ``n_chars`` (module doc of
    ``evoharness.sim.generator``, 6) at adherence ``f`` and guidance ``guidance``."""
    rate = min(p.char_cap, p.char_base + p.char_per_char * n_chars) * f
    if guidance > p.guidance_best:
        rate *= 1.0 + p.text_guidance_gain * (guidance - p.guidance_best)
    return rate


def corrupt(text: str, rate: float, draws: Draws, key: tuple[Any, ...]) -> str:
    """``text`` with each letter or digit replaced w.p. ``rate`` by a random one of its kind
    (draws ``char`` / ``char_pick`` keyed by ``key`` and the character's index)."""
    out = []
    for j, ch in enumerate(text):
        if ch.isalnum() and draws.u("char", *key, j) < rate:
            d = _substitute(ch, draws.u("char_pick", *key, j))
            out.append(d.lower() if ch.islower() else d)
        else:
            out.append(ch)
    return "".join(out)


def plan(
    p: SimParams,
    program: Program,
    draws: Draws,
    f: float,
    refs: list[Image.Image],
    outcomes: list[ReferenceOutcome] | None = None,
    read: Callable[[Image.Image], Subject | None] = read_subject,
) -> tuple[list[Item], list[str], list[str], list[str]]:
    """What ``program`` draws under profile ``p`` at adherence ``f`` (steps 1–9 of
    ``evoharness.sim.generator``'s docstring; ``refs``: its reference images, read): the
    items in drawing order (unplaced, but for layout boxes), and the classes missed, dropped
    past the token limit, and the layout labels missed. ``outcomes``, when given, receives
    one ``ReferenceOutcome`` per reference (``plan_references``); ``read`` reads a
    reference's subject from its pixels (``evoharness.sim.subject.read_subject``)."""
    g = program.params.guidance_scale
    reading = read_prompt(program.prompt, p.capabilities.max_prompt_tokens)
    negative = class_names_in(program.negative_prompt) if program.negative_prompt else set()
    layout = program.layout or []
    layout_classes = {it.label for it in layout}
    items: list[Item] = []
    missed: list[str] = []
    k = len({o.cls for o in reading.objects if not o.negated})
    p_miss = min(p.miss_cap, (p.miss_base + p.miss_per_object * max(0, k - 1)) * f)

    # a phrase's key: its class and occurrence, so unrelated edits keep its draws
    seen: dict[str, int] = {}
    keys: list[tuple[str, int]] = []
    for o in reading.objects:
        keys.append((o.cls, seen.get(o.cls, 0)))
        seen[o.cls] = seen.get(o.cls, 0) + 1

    # colours: leak inside a clause, weaker across clauses, drift, long-prompt drop
    colors: list[str | None] = [o.colors[-1] if o.colors else None for o in reading.objects]
    drawn_colors = list(colors)
    coloured = [i for i, o in enumerate(reading.objects) if colors[i] and not o.negated]
    by_clause: dict[int, list[int]] = {}
    for i in coloured:
        by_clause.setdefault(reading.objects[i].clause, []).append(i)
    p_drop = min(
        p.attr_drop_cap, p.attr_drop_per_token * max(0, reading.n_read - p.attr_drop_start)
    )
    for i in coloured:
        key = keys[i]
        members = by_clause[reading.objects[i].clause]
        inside = [colors[j] for j in members if j != i and colors[j] != colors[i]]
        across = [colors[j] for j in coloured if j not in members and colors[j] != colors[i]]
        m = len(members)
        p_in = min(p.leak_cap, p.leak_per_object * (m - 1) * f) if m >= 2 else 0.0
        p_across = p.leak_cross_factor * min(
            p.leak_cap, p.leak_per_object * max(1, len(coloured) - 1) * f
        )
        if inside and draws.u("leak", key) < p_in:
            drawn_colors[i] = _pick(inside, draws.u("leak_pick", key))
        elif across and draws.u("leak_across", key) < p_across:
            drawn_colors[i] = _pick(across, draws.u("leak_pick", key))
        elif m == 1 and draws.u("drift", key) < p.color_drift * f:
            if draws.u("drift_kind", key) < 0.5:
                drawn_colors[i] = None
            else:
                alt = [c for c in COLORS if c != colors[i]]
                drawn_colors[i] = _pick(alt, draws.u("drift_pick", key))
        if p_drop and draws.u("attr_drop", key) < p_drop:
            drawn_colors[i] = None

    colours = palette_of(program.prompt, p.capabilities.max_prompt_tokens)
    palette = Palette(colours, min(0.95, p.palette_override * f) if colours else 0.0)
    for i, o in enumerate(reading.objects):
        if palette.p and not o.negated and draws.u("palette", keys[i]) < palette.p:
            drawn_colors[i] = _pick(list(palette.colours), draws.u("palette_pick", keys[i]))

    drawn_textures = bind_textures(p, reading, keys, f, draws, p_drop)
    drawn_shapes = bind_textures(p, reading, keys, f, draws, p_drop, "shapes")

    # phrases bound to a program reference ("the mug from image 1") are drawn from it
    # (the first phrase bound to a reference takes it; a later one is drawn from its words)
    bound: dict[int, int] = {}
    for i, o in enumerate(reading.objects):
        r = o.reference
        if r is not None and r <= len(refs) and not o.negated and r - 1 not in bound.values():
            bound[i] = r - 1
    drawn_phrase: dict[int, list[Item]] = {}
    for i, o in enumerate(reading.objects):
        key = keys[i]
        if i in bound:
            continue
        if o.cls in layout_classes:
            continue
        if o.negated and draws.u("negation", key) >= p.negation_draws:
            continue
        if o.cls in negative and draws.u("negative", key) >= p.negative_keep:
            continue
        if draws.u("miss", key) < p_miss:
            missed.append(o.cls)
            continue
        n = o.count if o.count is not None else 2 + int(draws.u("plural", key) * 2)
        if o.count is not None and n >= 2:
            table = p.count_correct
            c = table[min(n, len(table) - 1)] - (p.digit_penalty if o.digit else 0.0)
            if draws.u("count", key) < min(0.95, (1.0 - c) * f):
                step = 2 if n >= 5 and draws.u("count_far", key) < p.count_far else 1
                n = max(1, n + (step if draws.u("count_dir", key) < 0.5 else -step))
        n = max(0, min(n, 12))
        st = library.sticker(o.cls, drawn_colors[i])
        drawn_phrase[i] = []
        for j in range(n):
            it = Item(
                "object",
                key=(*key, j),
                cls=o.cls,
                color=drawn_colors[i],
                aspect=st.aspect,
                texture=drawn_textures[i],
                shape=drawn_shapes[i],
            )
            items.append(it)
            drawn_phrase[i].append(it)
    got = plan_references(
        p,
        reading,
        BoundReferences(refs, bound, read),
        draws,
        f,
        items,
        (drawn_colors, drawn_textures, drawn_shapes),
    )
    for res in got:
        if res.phrase is not None:
            drawn_phrase[next(i for i, ri in bound.items() if ri == res.index)] = res.items
    if outcomes is not None:
        outcomes.extend(got)

    # spatial relations: honoured, else the default composition (swapped / stacked), else random
    for rel in reading.relations:
        a, b = drawn_phrase.get(rel.subject), drawn_phrase.get(rel.target)
        if not a or not b:
            continue
        rkey = (keys[rel.subject], keys[rel.target])
        if rel.relation in DEPTH_RELATIONS:
            plan_depth(p, rel.relation, a[0], b[0], rkey, draws, f, items)
            continue
        if rel.relation in PROXIMITY_RELATIONS:
            honoured = draws.u("proximity", *rkey) < p.relation_honoured / f
            ra, rb = _proximity_regions(honoured, draws.u("proximity_corner", *rkey))
        elif draws.u("relation", *rkey) < p.relation_honoured / f:
            ra, rb = _regions(rel.relation)
        elif draws.u("composition", *rkey) < p.composition_default:
            if draws.u("composition_swap", *rkey) < p.composition_swap:
                ra, rb = _regions(_OPPOSITE[rel.relation])
            else:
                ra, rb = _stacked(rel.relation)
        else:
            continue
        for it in a:
            it.region = ra
        for it in b:
            it.region = rb

    # text (a layout item carrying the same text covers it, as a layout label covers a
    # prompt object: the layout's panel is drawn instead of a second one)
    layout_texts = {(li.text or "").strip().lower() for li in layout if li.text}
    for ti, t in enumerate(reading.texts):
        rate = text_rate(p, len(t.text), f, g)
        if not t.quoted:
            rate = min(0.9, rate * p.unquoted_factor)
        drawn = corrupt(t.text, rate, draws, ("text", ti))
        if t.text.strip().lower() not in layout_texts:
            items.append(
                Item("panel", key=("text", ti), text=drawn, intended=t.text, quoted=t.quoted)
            )

    read_classes = {o.cls for o in reading.objects if not o.negated}
    layout_missed = plan_layout(p, program, draws, f, negative, items, read_classes, palette)
    for res in got:  # cards (references without a known subject) go last, as before
        for it in res.items:
            if it.kind == "reference":
                items.append(it)
    return items, missed, list(reading.dropped), layout_missed


@dataclass(frozen=True)
class BoundReferences:
    """A program's reference images as the world meets them: ``images`` in program order,
    ``bound`` (prompt phrase index → 0-based reference index, the reader's binding) and
    ``read``, which reads a reference's subject from its pixels (``read_subject``)."""

    images: Sequence[Image.Image]
    bound: dict[int, int]
    read: Callable[[Image.Image], Subject | None] = read_subject


def plan_references(
    p: SimParams,
    reading: Reading,
    refs: BoundReferences,
    draws: Draws,
    f: float,
    items: list[Item],
    attributes: tuple[list[str | None], list[str | None], list[str | None]],
) -> list[ReferenceOutcome]:
    """Reference-conditioned generation (``SimParams`` class doc, "References"): one
    ``ReferenceOutcome`` per reference of ``refs`` (``BoundReferences``), in order;
    ``attributes``: each phrase's drawn colour, texture and shape (for a glyph drawn
    beside its subject). Subject items (kind ``object``, ``source`` ``reference``) are
    appended to ``items`` here; a reference without a known subject becomes a card (kind
    ``reference``), returned in its outcome's ``items`` for the caller to append last.
    Every draw is keyed ``ref_*`` by the reference's index (and, once read, its subject's
    class and colour)."""
    colors, textures, shapes = attributes
    bound, read = refs.bound, refs.read
    n = len(refs.images)
    p_omit = min(p.ref_omit_cap, (p.ref_omit_base + p.ref_omit_per_ref * max(0, n - 1)) * f)
    phrase_of = {r: i for i, r in bound.items()}
    out: list[ReferenceOutcome] = []
    for r, im in enumerate(refs.images):
        i = phrase_of.get(r)
        o = reading.objects[i] if i is not None else None
        res = ReferenceOutcome(r, o.cls if o is not None else None, None, "drawn")
        out.append(res)
        if o is None and draws.u("ref_unmentioned", r) < p.ref_unmentioned_ignored:
            res.outcome = "ignored"
            continue
        sub = read(im)
        res.subject = sub
        if sub is None:
            res.outcome = "card"
            card = Item(
                "reference", key=("ref", r), image=im, aspect=im.width / im.height, ref_index=r
            )
            res.items.append(card)
            continue
        rkey = (r, sub.cls, sub.color)  # the reference and what it shows
        if draws.u("ref_omit", *rkey) < p_omit:
            res.outcome = "omitted"
            continue
        res.pasted = draws.u("ref_paste", *rkey) < p.ref_pasted
        aspect = library.sticker(sub.cls, sub.color).aspect
        copies = 1
        if draws.u("ref_duplicate", *rkey) < p.ref_duplicate:
            res.duplicated, copies = True, 2
        for j in range(copies):
            res.items.append(
                Item(
                    "object",
                    key=("ref", r, j),
                    cls=sub.cls,
                    color=sub.color,
                    source="reference",
                    aspect=aspect,
                    ref_index=r,
                    pasted=res.pasted,
                    texture=sub.texture,
                )
            )
        if (
            o is not None
            and i is not None
            and not res.duplicated
            and draws.u("ref_glyph", *rkey) < p.ref_glyph_beside
        ):
            res.glyph_beside = True
            res.items.append(
                Item(
                    "object",
                    key=("ref_glyph", r),
                    cls=o.cls,
                    color=colors[i],
                    aspect=library.sticker(o.cls, colors[i]).aspect,
                    texture=textures[i],
                    shape=shapes[i],
                )
            )
        items.extend(res.items)
    return out


def plan_depth(
    p: SimParams,
    relation: str,
    a: Item,
    b: Item,
    rkey: tuple[Any, ...],
    draws: Draws,
    f: float,
    items: list[Item],
) -> None:
    """ "``a`` behind / in front of ``b``" (module doc, 4b): honoured w.p.
    ``relation_honoured / f``: the back object (``a`` for "behind") is placed at
    ``DEPTH_SCALE`` of the front object's size (long side) and drawn first, the front one overlaps it (``evoharness.sim.placement.place``); otherwise,
    w.p. ``composition_default · composition_swap`` the order is swapped (the opposite
    relation is drawn), else the two are placed apart as usual (no occlusion). Draws are
    keyed ``depth*`` (new names: no other draw moves). Only the first instance of each
    phrase takes part."""
    back, front = (a, b) if relation == "behind" else (b, a)
    if draws.u("depth", *rkey) >= p.relation_honoured / f:
        swap = p.composition_default * p.composition_swap
        if draws.u("depth_composition", *rkey) >= swap:
            return
        back, front = front, back
    if back.over is not None or front.over is not None or front.scale != 1.0:
        return  # already in another depth pair: one pair per object
    back.scale = DEPTH_SCALE
    back.front = front
    if back.region is None:  # farther is higher: room below it for the front object
        back.region = (0.15, 0.1, 0.85, 0.55)
    front.over = back
    lo, hi = DEPTH_OCCLUSION
    front.occlusion = lo + (hi - lo) * draws.u("depth_occlusion", *rkey)
    # painted in list order: the back object before the front one
    ib, i_f = items.index(back), items.index(front)
    if ib > i_f:
        items.insert(i_f, items.pop(ib))


def bind_textures(
    p: SimParams,
    reading: Reading,
    keys: list[tuple[str, int]],
    f: float,
    draws: Draws,
    p_drop: float,
    kind: str = "textures",
) -> list[str | None]:
    """The texture (``kind="textures"``) or shape (``"shapes"``) drawn for each phrase
    (issue 19): its last such word, bound like a colour — inside a clause of m ≥ 2 such
    objects it takes another's w.p. min(leak_cap, leak_per_object·(m−1))·f, and long
    prompts drop it w.p. ``p_drop`` (the profile's colour-binding numbers: binding is one
    failure). Draws are keyed ``tex_*`` / ``shape_*`` by the phrase, so a prompt without
    such words draws nothing new."""
    tag = "tex" if kind == "textures" else "shape"
    values = [getattr(o, kind)[-1] if getattr(o, kind) else None for o in reading.objects]
    drawn = list(values)
    marked = [i for i, o in enumerate(reading.objects) if values[i] and not o.negated]
    for i in marked:
        key = keys[i]
        clause = reading.objects[i].clause
        members = [j for j in marked if reading.objects[j].clause == clause]
        inside = [values[j] for j in members if j != i and values[j] != values[i]]
        m = len(members)
        p_in = min(p.leak_cap, p.leak_per_object * (m - 1) * f) if m >= 2 else 0.0
        if inside and draws.u(f"{tag}_leak", key) < p_in:
            drawn[i] = _pick(inside, draws.u(f"{tag}_leak_pick", key))
        if p_drop and draws.u(f"{tag}_drop", key) < p_drop:
            drawn[i] = None
    return drawn


def plan_layout(
    p: SimParams,
    program: Program,
    draws: Draws,
    f: float,
    negative: set[str],
    items: list[Item],
    read_classes: set[str] | None = None,
    palette: Palette | None = None,
) -> list[str]:
    """Layout boxes, followed the way layout-to-image models do (see module doc, 9).
    ``read_classes``: the object classes read from the prompt (a box whose label is not
    among them is dropped w.p. ``layout_needs_token``; None: not checked); ``palette``:
    the colours a palette / style word imposes, taken w.p. ``palette.p`` per box (None:
    none)."""
    palette = palette or Palette()
    p_palette = palette.p
    layout = program.layout or []
    if not layout:
        return []
    W, H = program.params.width, program.params.height
    f_layout = p.layout_adherence(program.params.guidance_scale, program.params.steps)
    seen: dict[str, int] = {}
    lkeys: list[tuple[str, str, int]] = []
    for li in layout:
        lkeys.append(("layout", li.label, seen.get(li.label, 0)))
        seen[li.label] = seen.get(li.label, 0) + 1
    objects = [i for i, li in enumerate(layout) if li.label.lower() not in TEXT_LABELS]
    n = len(objects)
    dropped: set[int] = set()
    for a in range(len(objects)):
        for b in range(a + 1, len(objects)):
            i, j = objects[a], objects[b]
            if i in dropped or j in dropped:
                continue
            if _iou(layout[i].box, layout[j].box) > p.layout_overlap_iou:
                if draws.u("merge", lkeys[i], lkeys[j]) < p.layout_merge:
                    dropped.add(j)
    colours = [li.color for li in layout if li.color]
    # a box's texture and shape: the last of its attributes of that kind (as a phrase's)
    textures = [li.textures[-1] if li.textures else None for li in layout]
    shapes = [li.shapes[-1] if li.shapes else None for li in layout]
    missed: list[str] = []
    g = program.params.guidance_scale
    for i, li in enumerate(layout):
        key = lkeys[i]
        x0, y0, x1, y1 = li.box
        box = (round(x0 * W), round(y0 * H), round(x1 * W), round(y1 * H))
        text = None
        if li.text:
            rate = text_rate(p, len(li.text), f, g) * p.layout_text_factor
            text = corrupt(li.text, rate, draws, key)
        if li.label.lower() in TEXT_LABELS:
            items.append(
                Item("panel", key=key, text=text, intended=li.text, source="layout", box=box)
            )
            continue
        if i in dropped or (li.label in negative and draws.u("negative", key) >= p.negative_keep):
            missed.append(li.label)
            continue
        if (
            read_classes is not None
            and p.layout_needs_token
            and li.label not in read_classes
            and draws.u("layout_token", key) < p.layout_needs_token
        ):
            missed.append(li.label)  # guidance has no token of this object to steer
            continue
        p_in = p.layout_in_box - p.layout_in_box_per_box * (n - 1)
        if (x1 - x0) * (y1 - y0) < p.layout_small_box:
            p_in -= p.layout_small_penalty
        p_in = 1.0 - (1.0 - p_in) * f_layout  # collapse / too few steps (SimParams)
        in_box = draws.u("in_box", key) < p_in
        if not in_box and draws.u("box_miss", key) < p.layout_miss_share:
            missed.append(li.label)
            continue
        color = box_attribute(p, li.color, colours, draws, "box_color", key)
        if p_palette and draws.u("palette", key) < p_palette:
            color = _pick(list(palette.colours), draws.u("palette_pick", key))
        texture = box_attribute(p, textures[i], [t for t in textures if t], draws, "box_tex", key)
        shape = box_attribute(p, shapes[i], [s for s in shapes if s], draws, "box_shape", key)
        items.append(
            Item(
                "object",
                key=key,
                cls=li.label,
                color=color,
                text=text,
                source="layout",
                box=box if in_box else None,
                aspect=library.sticker(li.label, color).aspect,
                pasted=True,
                texture=texture,
                shape=shape,
            )
        )
    return missed


def box_attribute(
    p: SimParams,
    value: str | None,
    values: list[str],
    draws: Draws,
    tag: str,
    key: tuple[Any, ...],
) -> str | None:
    """A layout box's colour (``tag="box_color"``), texture (``"box_tex"``) or shape
    (``"box_shape"``) as drawn: ``value`` holds w.p. ``layout_color_holds``, else it is
    another of the layout's ``values`` (w.p. 1/2, when there is one) or none. Draws are
    keyed ``tag`` / ``tag_pick`` by the box, so a box without the attribute draws nothing."""
    if value is None or draws.u(tag, key) < p.layout_color_holds:
        return value
    others = [v for v in values if v != value]
    u = draws.u(f"{tag}_pick", key)
    return _pick(others, u) if others and u < 0.5 else None


def lose_small(
    p: SimParams,
    items: list[Item],
    draws: Draws,
    program: Program,
    missed: list[str],
    layout_missed: list[str],
) -> None:
    """Below ``steps_min`` steps, each placed object (prompt or layout) whose long side is
    under ``steps_small_frac`` of the image side is removed w.p. ``min(0.9,
    steps_small_miss · missing steps)`` (draws ``steps_small``) and listed as missed: fine
    detail is denoised last (``SimParams``). Nothing happens at ``steps_min`` or more."""
    missing = p.steps_min - program.params.steps
    if missing <= 0 or not p.steps_small_miss or not p.steps_small_frac:
        return
    rate = min(0.9, p.steps_small_miss * missing)
    side = min(program.params.width, program.params.height)
    for it in list(items):
        if it.kind != "object" or it.box is None or it.cls is None:
            continue
        if it.over is not None or it.front is not None:
            continue  # a depth pair is drawn as one occlusion
        long_side = max(it.box[2] - it.box[0], it.box[3] - it.box[1])
        if long_side < p.steps_small_frac * side and draws.u("steps_small", *it.key) < rate:
            items.remove(it)
            (layout_missed if it.source == "layout" else missed).append(it.cls)


def _regions(
    relation: str,
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """Allowed centre regions (x0, y0, x1, y1 fractions) for subject and target."""
    if relation == "left of":
        return (0.0, 0.1, 0.38, 0.9), (0.62, 0.1, 1.0, 0.9)
    if relation == "right of":
        return (0.62, 0.1, 1.0, 0.9), (0.0, 0.1, 0.38, 0.9)
    if relation == "above":
        return (0.1, 0.0, 0.9, 0.38), (0.1, 0.62, 0.9, 1.0)
    return (0.1, 0.62, 0.9, 1.0), (0.1, 0.0, 0.9, 0.38)


def _stacked(
    relation: str,
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """The default composition of an unhonoured relation that is not swapped: the pair on the
    other axis, centred, so that GenEval's rule finds no relation of the asked kind."""
    if relation in ("left of", "right of"):
        return (0.4, 0.0, 0.6, 0.4), (0.4, 0.6, 0.6, 1.0)
    return (0.0, 0.4, 0.4, 0.6), (0.6, 0.4, 1.0, 0.6)


#: Proximity placement (``_proximity_regions``): the band of centre heights of an honoured
#: pair and the corner size of an unhonoured one, as fractions of the image side. Centres in
#: the band are at most 0.24 apart down, in opposite corners at least 1 − 2·0.32 = 0.36 apart
#: on both axes: each at least 0.047 of the side (24 px at 512) from T2I-CompBench's 0.313.
PROXIMITY_BAND = (0.38, 0.62)
PROXIMITY_CORNER = 0.32


def _proximity_regions(
    honoured: bool, u: float
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """Allowed centre regions (x0, y0, x1, y1 fractions) for the subject and target of a
    proximity relation. Honoured: both in one horizontal band (``PROXIMITY_BAND``) across the
    middle 80 %, so side by side and close by T2I-CompBench's rule (``tasks.proximity``).
    Not honoured: opposite corners of ``PROXIMITY_CORNER``, apart on both axes by more than
    the rule's threshold; ``u`` (a uniform in [0, 1)) picks the subject's corner."""
    if honoured:
        band = (0.1, PROXIMITY_BAND[0], 0.9, PROXIMITY_BAND[1])
        return band, band
    a = PROXIMITY_CORNER
    corners = [
        (0.0, 0.0, a, a),
        (1 - a, 0.0, 1.0, a),
        (1 - a, 1 - a, 1.0, 1.0),
        (0.0, 1 - a, a, 1.0),
    ]
    k = min(3, int(u * 4))
    return corners[k], corners[(k + 2) % 4]
