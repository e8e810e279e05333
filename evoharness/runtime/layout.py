"""The deterministic layout planner (the ``layout_planner`` tool, ``planner: deterministic``).

Turns the constraints a harness extracted from the prompt into layout boxes
(``evoharness.program.LayoutItem``, ``[x0, y0, x1, y1]`` fractions of the image, y down):

1. **Objects**: one group per ``object``/``count`` constraint, in order, with n instances
   (``max_count``, else ``min_count``, else 1). ``color`` constraints give the colour of the
   first group of that class that has none yet; ``attribute`` constraints naming a texture/
   material or a shape (any word of ``vocab.TEXTURES`` / ``vocab.SHAPES``) give that canonical
   attribute, alike, to the first group of that class without one of that kind (its boxes'
   ``LayoutItem.attributes``: a grounding phrase "a wooden chair" per box, as GLIGEN-class
   models take it). A colour or attribute with ``min_count`` k goes to k instances of the
   first group of its class with k free: one count over several phrases ("two red cars and a
   blue car": ``count:car`` 3, red k=2, blue k=1) gets 2 red boxes and 1 blue. Other
   attribute values are not layout attributes and are left out.
2. **Relations**: ``position`` constraints order the groups on two axes: ``A left of B`` means
   column(A) < column(B), ``A above B`` means row(A) < row(B). Columns and rows are longest-path
   layers of these precedence graphs (an edge that would close a cycle is dropped and
   reported). Groups on the same (column, row) cell share it side by side. ``A next to B`` /
   ``A near B`` (``PROXIMITY_RELATIONS``) puts the two in adjacent cells of one row: A one
   column before B (after the left/right edges, and the other way round when those already
   put B before A), and one row for both (the two groups are merged into one node of the row
   graph). When above/below edges already stack the two, they are neighbours in one column
   instead (merged into one node of the column graph). A merge the graph refuses (the pair is
   already ordered on that axis, e.g. through another proximity pair) is reported dropped on
   that axis. Generic layout knowledge: side by side, at a neighbour's distance.
   ``A behind B`` / ``B in front of A`` (depth, T2I-CompBench's 3D-spatial words) puts A in
   B's cell as one *depth pair* (when both are single objects): overlapping boxes, A's
   smaller (``DEPTH_SCALE`` of B's side) and higher, B's lower and covering
   ``DEPTH_OVERLAP`` of A's box — how photographs show depth (occlusion, farther is smaller
   and higher in the frame) and what layout-to-image models draw from overlapping boxes —
   and A listed first: layout items are listed back to front (generators draw overlapping
   boxes in list order, the later on top). The boxes' IoU stays under 0.15, so a generator
   does not read them as one object.
3. **Instances**: a group's n instances fill its region in a ``ceil(sqrt(n))``-column grid.
   Every box keeps 10 % of its cell free on each side so neighbouring boxes never touch, and
   is at most ``MAX_SIDE`` of the image side, centred in its cell; when the object boxes
   together cover more than ``MAX_FILL`` of the image, all shrink about their centres.
4. **Text**: ``text`` constraints get panels (label ``TEXT_LABEL``) in a band at the bottom
   (the top 72 % stays for objects), side by side.

The planner is pure: same constraints → same boxes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evoharness.program import LayoutItem
from evoharness.tasks.models import PROXIMITY_RELATIONS, Constraint, ConstraintType
from evoharness.vocab import SHAPE_WORDS, TEXTURE_WORDS

#: Label of a layout item that carries text to render (a sign/board panel).
TEXT_LABEL = "sign"
_CELL_PAD = 0.10  # fraction of a cell kept free on each side
#: Largest box side and largest summed box area (fractions of the image side / area).
#: Generators draw objects at natural sizes with background around them; boxes filling most
#: of the frame also hide the background a detector models (measured on the embedded
#: inspector: detection of one object falls off above ~0.45 of the side, of three round
#: objects above ~0.33, i.e. ~0.33 of the area covered).
MAX_SIDE = 0.3
MAX_FILL = 0.25
_TEXT_BAND = 0.72  # objects above this y when the prompt has text
#: Depth pair (A behind B) inside its slot, as fractions of the slot: back box, front box.
#: The back box is ~0.7 of the front one per side, its lower-right 40% covered by the front.
_DEPTH_BACK = (0.05, 0.05, 0.55, 0.50)
_DEPTH_FRONT = (0.25, 0.20, 0.95, 0.95)
DEPTH_SCALE = 0.7
DEPTH_OVERLAP = 0.4
_PAIR_SIDE = 1.5 * MAX_SIDE  # largest side of a depth pair's slot


@dataclass
class _Group:
    """One object/count constraint's ``n`` instances; ``colors``/``textures``/``shapes`` hold
    each instance's value (None = not stated), so one count can carry several colours."""

    cls: str
    n: int
    colors: list[str | None] = field(default_factory=list)
    textures: list[str | None] = field(default_factory=list)
    shapes: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        for kind in ("colors", "textures", "shapes"):
            setattr(self, kind, [None] * self.n)

    @property
    def color(self) -> str | None:
        """The first instance's colour (depth pairs hold single objects)."""
        return self.colors[0] if self.colors else None

    def attributes_of(self, i: int) -> tuple[str, ...]:
        """Instance ``i``'s layout attributes: its shape, then its texture."""
        return tuple(a for a in (self.shapes[i], self.textures[i]) if a)


def _assign_attributes(groups: list[_Group], constraints: Sequence[Constraint]) -> None:
    """Colours and texture/shape attributes of the groups' instances (step 1): a constraint
    with ``min_count`` k gives its value to k free instances of the first group of its class
    that has k free (for that kind); one without ``min_count`` to every instance of the first
    group of its class with none of that kind yet."""
    for c in constraints:
        if not isinstance(c.value, str):
            continue
        if c.type is ConstraintType.color:
            kind, value = "colors", c.value
        elif c.type is ConstraintType.attribute:
            word = c.value.strip().lower()
            if word in TEXTURE_WORDS:
                kind, value = "textures", TEXTURE_WORDS[word]
            elif word in SHAPE_WORDS:
                kind, value = "shapes", SHAPE_WORDS[word]
            else:
                continue
        else:
            continue
        for g in groups:
            slots: list[str | None] = getattr(g, kind)
            free = [i for i, v in enumerate(slots) if v is None]
            if g.cls != c.subject or not free:
                continue
            if c.min_count is None:
                if len(free) < g.n:
                    continue
            elif len(free) < c.min_count:
                continue
            for i in free[: c.min_count or g.n]:
                slots[i] = value
            break


def _layers(n: int, edges: list[tuple[int, int]]) -> tuple[list[int], list[tuple[int, int]]]:
    """Longest-path layers of a precedence graph (a before b); drops cycle-closing edges."""
    kept: list[tuple[int, int]] = []
    dropped: list[tuple[int, int]] = []
    for a, b in edges:
        if a == b or _reaches(b, a, kept):
            dropped.append((a, b))
        else:
            kept.append((a, b))
    layer = [0] * n
    for _ in range(n):
        changed = False
        for a, b in kept:
            if layer[b] < layer[a] + 1:
                layer[b] = layer[a] + 1
                changed = True
        if not changed:
            break
    return layer, dropped


def _reaches(src: int, dst: int, edges: list[tuple[int, int]]) -> bool:
    seen, stack = {src}, [src]
    while stack:
        v = stack.pop()
        if v == dst:
            return True
        for a, b in edges:
            if a == v and b not in seen:
                seen.add(b)
                stack.append(b)
    return False


def _merged_layers(
    n: int, edges: list[tuple[int, int]], same: list[tuple[int, int]]
) -> tuple[list[int], list[tuple[int, int]]]:
    """Layers of ``n`` groups on one axis: ``_layers`` of the precedence ``edges`` with each
    pair in ``same`` merged into one node first (so both get one layer), unless the edges
    already order the two; such a pair is returned among the dropped edges."""
    rep = list(range(n))

    def find(k: int) -> int:
        while rep[k] != k:
            k = rep[k]
        return k

    dropped: list[tuple[int, int]] = []
    for a, b in same:
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        merged = [(find(x), find(y)) for x, y in edges]
        if _reaches(ra, rb, merged) or _reaches(rb, ra, merged):
            dropped.append((a, b))
            continue
        rep[rb] = ra
    layer, dropped_edges = _layers(n, [(find(a), find(b)) for a, b in edges])
    kept = {e for e in [(find(a), find(b)) for a, b in edges] if e not in dropped_edges}
    dropped += [(a, b) for a, b in edges if (find(a), find(b)) not in kept]
    return [layer[find(k)] for k in range(n)], dropped


def _shrink(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    w = min((x1 - x0) * (1 - 2 * _CELL_PAD), MAX_SIDE)
    h = min((y1 - y0) * (1 - 2 * _CELL_PAD), MAX_SIDE)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return (round(cx - w / 2, 4), round(cy - h / 2, 4), round(cx + w / 2, 4), round(cy + h / 2, 4))


def _scale(box: tuple[float, float, float, float], k: float) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = box
    cx, cy, w, h = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) * k, (y1 - y0) * k
    return (round(cx - w / 2, 4), round(cy - h / 2, 4), round(cx + w / 2, 4), round(cy + h / 2, 4))


def _depth_pair(
    groups: list[_Group], slot: list[int], x0: float, y0: float, w: float, h: float
) -> list[LayoutItem]:
    """The back and the front object of a depth pair in the slot (x0, y0, w, h), back
    first (module doc, 2): ``_DEPTH_BACK`` / ``_DEPTH_FRONT`` of a square-ish region of
    side at most ``_PAIR_SIDE``, centred in the slot with 10 % kept free on each side."""
    side_w = min(w * (1 - 2 * _CELL_PAD), _PAIR_SIDE)
    side_h = min(h * (1 - 2 * _CELL_PAD), _PAIR_SIDE)
    cx, cy = x0 + w / 2, y0 + h / 2
    rx, ry = cx - side_w / 2, cy - side_h / 2
    out = []
    for k, (a, b, c, d) in zip(slot, (_DEPTH_BACK, _DEPTH_FRONT), strict=True):
        box = (
            round(rx + a * side_w, 4),
            round(ry + b * side_h, 4),
            round(rx + c * side_w, 4),
            round(ry + d * side_h, 4),
        )
        out.append(
            LayoutItem(
                label=groups[k].cls,
                box=box,
                color=groups[k].color,
            )
        )
    return out


def plan_layout(
    constraints: Sequence[Constraint], margin: float = 0.05
) -> tuple[list[LayoutItem], dict[str, Any]]:
    """Boxes for the objects, counts, colours, relations and texts in ``constraints``.

    ``margin``: free border as a fraction of the image side (0..0.3). Returns the layout items
    (empty when there is nothing to place) and details for the trace (groups, columns, rows,
    dropped relations)."""
    groups: list[_Group] = []
    for c in constraints:
        if c.type is ConstraintType.object:
            groups.append(_Group(c.subject, 1))
        elif c.type is ConstraintType.count:
            n = c.max_count if c.max_count is not None else (c.min_count or 1)
            groups.append(_Group(c.subject, max(1, min(int(n), 16))))
    _assign_attributes(groups, constraints)
    xe: list[tuple[int, int]] = []
    ye: list[tuple[int, int]] = []
    near: list[tuple[int, int]] = []
    behind: dict[int, int] = {}  # back group -> front group (depth pairs)
    for c in constraints:
        if c.type is not ConstraintType.position or not isinstance(c.value, str):
            continue
        other = c.ref if c.ref is not None and 0 <= c.ref < len(groups) else None
        if other is None or groups[other].cls != c.value:
            other = next((k for k, g in enumerate(groups) if g.cls == c.value), None)
        subj = next((k for k, g in enumerate(groups) if g.cls == c.subject and k != other), None)
        if subj is None or other is None:
            continue
        if c.relation == "left of":
            xe.append((subj, other))
        elif c.relation == "right of":
            xe.append((other, subj))
        elif c.relation == "above":
            ye.append((subj, other))
        elif c.relation == "below":
            ye.append((other, subj))
        elif c.relation in PROXIMITY_RELATIONS:
            near.append((subj, other))
        elif c.relation in ("behind", "in front of"):
            back, front = (subj, other) if c.relation == "behind" else (other, subj)
            paired = set(behind) | set(behind.values())
            if groups[back].n == 1 and groups[front].n == 1 and not {back, front} & paired:
                behind[back] = front
    stacked = [(a, b) for a, b in near if _reaches(a, b, ye) or _reaches(b, a, ye)]
    beside = [e for e in near if e not in stacked]
    for subj, other in beside:  # after the directional edges, which take precedence
        xe.append((other, subj) if _reaches(other, subj, xe) else (subj, other))
    cols, dropped_x = _merged_layers(len(groups), xe, stacked)
    rows, dropped_y = _merged_layers(len(groups), ye, beside)
    for back, front in behind.items():  # a depth pair shares the front object's cell
        cols[back], rows[back] = cols[front], rows[front]
    texts = [c for c in constraints if c.type is ConstraintType.text and c.value]
    lo, hi = margin, 1.0 - margin
    obj_bottom = lo + (hi - lo) * _TEXT_BAND if texts else hi
    items: list[LayoutItem] = []
    if groups:
        n_cols, n_rows = max(cols) + 1, max(rows) + 1
        cw, rh = (hi - lo) / n_cols, (obj_bottom - lo) / n_rows
        cells: dict[tuple[int, int], list[int]] = {}
        for k in range(len(groups)):
            cells.setdefault((cols[k], rows[k]), []).append(k)
        for (col, row), members in sorted(cells.items()):
            x0, y0 = lo + col * cw, lo + row * rh
            # slots side by side: a depth pair is one slot (back first), others one each
            slots = [[b, behind[b]] for b in members if b in behind and behind[b] in members]
            in_pair = {k for sl in slots for k in sl}
            slots += [[k] for k in members if k not in in_pair]
            slots.sort(key=lambda sl: members.index(sl[-1]))
            share = cw / len(slots)
            for j, slot in enumerate(slots):
                if len(slot) == 2:
                    items.extend(_depth_pair(groups, slot, x0 + j * share, y0, share, rh))
                    continue
                k = slot[0]
                g = groups[k]
                gx0 = x0 + j * share
                gc = math.ceil(math.sqrt(g.n))
                gr = math.ceil(g.n / gc)
                sw, sh = share / gc, rh / gr
                for i in range(g.n):
                    bx, by = gx0 + (i % gc) * sw, y0 + (i // gc) * sh
                    items.append(
                        LayoutItem(
                            label=g.cls,
                            box=_shrink(bx, by, bx + sw, by + sh),
                            color=g.colors[i],
                            attributes=g.attributes_of(i),
                        )
                    )
    fill = sum((i.box[2] - i.box[0]) * (i.box[3] - i.box[1]) for i in items)
    if fill > MAX_FILL:
        shrink = math.sqrt(MAX_FILL / fill)
        items = [i.model_copy(update={"box": _scale(i.box, shrink)}) for i in items]
    if texts:
        ty0 = obj_bottom if groups else lo
        tw = (hi - lo) / len(texts)
        for j, c in enumerate(texts):
            x0 = lo + j * tw
            items.append(
                LayoutItem(label=TEXT_LABEL, box=_shrink(x0, ty0, x0 + tw, hi), text=str(c.value))
            )
    details = {
        "groups": [
            {
                "label": g.cls,
                "n": g.n,
                "color": g.color if len(set(g.colors)) == 1 else None,
                **({"colors": list(g.colors)} if len(set(g.colors)) > 1 else {}),
                **({"attributes": list(g.attributes_of(0))} if g.attributes_of(0) else {}),
                **(
                    {"instance_attributes": [list(g.attributes_of(i)) for i in range(g.n)]}
                    if len({g.attributes_of(i) for i in range(g.n)}) > 1
                    else {}
                ),
            }
            for g in groups
        ],
        "columns": cols,
        "rows": rows,
        "texts": len(texts),
        "depth_pairs": [{"back": b, "front": f} for b, f in behind.items()],
        "dropped_relations": [{"axis": "x", "edge": list(e)} for e in dropped_x]
        + [{"axis": "y", "edge": list(e)} for e in dropped_y],
    }
    return items, details


__all__ = ["TEXT_LABEL", "plan_layout"]
