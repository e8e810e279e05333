"""Seeded synthetic tasks over the 80 GenEval/COCO classes, with exact constraints.

GenEval's prompts contain no quoted text, no negation and no long prompts, so they cannot
exercise half of the embedded world's failure modes. ``build_synthetic(seed, count)`` makes
``count`` tasks in six named families (``task_family``, so splits can be stratified), in turn:

- ``synthetic_text``: quoted text on a sign (``text`` constraint, ≤ 12 characters), several
  phrasings ("a sign that says", "a storefront sign reading", "a X next to a board with the
  text");
- ``synthetic_negation``: "a X with no Y" / "a X without any Y" / "... but no Y" (``object``
  X, ``negative`` Y);
- ``synthetic_long``: a prompt past 77 CLIP tokens (one of two filler descriptions first,
  the objects last), ``object`` constraints;
- ``synthetic_binding``: 2–3 coloured objects in one clause ("a red X, a blue Y and a green
  Z"), ``object`` + ``color`` constraints;
- ``synthetic_counting``: exact counts 2..8, as number words or digits (``count`` with
  ``min_count = max_count = n``);
- ``synthetic_position``: "A left of / to the left of / on the right of / above / below B"
  (``object`` A, ``object`` B, ``position``).

Task ids are ``synthetic/seed<S>/<i>``; ``metadata = {"source": "synthetic", "seed": S,
"tag": family}``. The same (seed, count) always gives the same tasks (numpy PCG64).
"""

from __future__ import annotations

import numpy as np

from evoharness.sim.reader import count_tokens
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness.vocab import CLASSES, COLORS, NUMBER_WORDS, article, plural

FAMILIES = (
    "synthetic_text",
    "synthetic_negation",
    "synthetic_long",
    "synthetic_binding",
    "synthetic_counting",
    "synthetic_position",
)

_WORDS = (
    "OPEN",
    "CLOSED",
    "SALE",
    "EXIT",
    "HELLO",
    "BAKERY",
    "HOTEL",
    "PARKING",
    "WELCOME",
    "FRESH FISH",
    "NO ENTRY",
    "CAFE 24",
    "SUMMER",
    "LIBRARY",
    "TAXI",
    "MARKET",
    "RADIO",
    "GARDEN",
    "PIZZA 2GO",
    "THANK YOU",
)
_FILLER = (
    "a highly detailed award winning photograph taken on a quiet sunny afternoon with soft "
    "natural light, shallow depth of field, warm muted tones, gentle film grain, a clean "
    "simple background, sharp focus, balanced composition, professional studio quality, "
    "realistic textures and subtle shadows, captured with a fifty millimetre lens at eye "
    "level, calm peaceful mood, rich colours, crisp details everywhere, gentle highlights, "
    "soft reflections, cinematic framing, ultra high resolution, masterpiece, trending on "
    "a popular art site, in the style of a classic magazine cover, showing"
)
_FILLER_2 = (
    "an intricate, richly textured editorial image with dramatic yet gentle lighting, "
    "carefully balanced colours, a softly blurred backdrop, fine surface detail, faint "
    "atmospheric haze, elegant minimal styling, precise lines, a calm and airy mood, subtle "
    "vignette, natural contrast, soft bokeh, polished finish, high dynamic range, delicate "
    "gradients, thoughtful negative space, professional grade retouching, museum quality "
    "print, and in the foreground"
)
_COLOR_NAMES = list(COLORS)


def _c(i: int, **kw: object) -> Constraint:
    return Constraint(constraint_id=f"c{i}", **kw)  # type: ignore[arg-type]


def build_synthetic(seed: int, count: int) -> list[Task]:
    """``count`` synthetic tasks from ``seed`` (see the module docstring).

    Raises ``ValueError`` for a negative seed or count.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    rng = np.random.default_rng(seed)
    tasks = []
    for i in range(count):
        family = FAMILIES[i % len(FAMILIES)]
        prompt, constraints = _MAKERS[family](rng)
        tasks.append(
            Task(
                task_id=f"synthetic/seed{seed}/{i}",
                prompt=prompt,
                task_family=family,
                constraints=constraints,
                metadata={"source": "synthetic", "seed": seed, "tag": family},
            )
        )
    return tasks


def _classes(rng: np.random.Generator, k: int) -> list[str]:
    return [CLASSES[int(j)] for j in rng.choice(len(CLASSES), k, replace=False)]


def _text(rng: np.random.Generator) -> tuple[str, list[Constraint]]:
    word = _WORDS[int(rng.integers(len(_WORDS)))]
    (obj,) = _classes(rng, 1)
    form = int(rng.integers(3))
    if form == 0:
        return f'a photo of a sign that says "{word}"', [
            _c(0, type="text", subject="sign", value=word)
        ]
    if form == 1:
        return f'a storefront sign reading "{word}"', [
            _c(0, type="text", subject="sign", value=word)
        ]
    return (
        f'a photo of {article(obj)} {obj} next to a board with the text "{word}"',
        [
            _c(0, type="object", subject=obj),
            _c(1, type="text", subject="board", value=word),
        ],
    )


def _negation(rng: np.random.Generator) -> tuple[str, list[Constraint]]:
    a, b = _classes(rng, 2)
    form = int(rng.integers(3))
    if form == 0:
        prompt = f"a photo of {article(a)} {a} with no {plural(b)}"
    elif form == 1:
        prompt = f"a photo of {article(a)} {a} without any {plural(b)}"
    else:
        prompt = f"a quiet room with {article(a)} {a} but no {b}"
    return prompt, [_c(0, type="object", subject=a), _c(1, type="negative", subject=b)]


def _long(rng: np.random.Generator) -> tuple[str, list[Constraint]]:
    objs = _classes(rng, int(rng.integers(1, 3)))
    tail = " and ".join(f"{article(o)} {o}" for o in objs)
    prompt = f"{_FILLER} {tail}" if rng.random() < 0.5 else f"{_FILLER_2} {tail}"
    assert count_tokens(prompt) > 77, "filler must push the objects past the token limit"
    return prompt, [_c(i, type="object", subject=o) for i, o in enumerate(objs)]


def _binding(rng: np.random.Generator) -> tuple[str, list[Constraint]]:
    m = int(rng.integers(2, 4))
    objs = _classes(rng, m)
    cols = [_COLOR_NAMES[int(j)] for j in rng.choice(len(_COLOR_NAMES), m, replace=False)]
    phrases = [f"{article(c)} {c} {o}" for c, o in zip(cols, objs, strict=True)]
    form = int(rng.integers(2))
    joined = ", ".join(phrases[:-1]) + " and " + phrases[-1]
    prompt = f"a photo of {joined}" if form == 0 else f"{joined} on a table"
    cons: list[Constraint] = []
    for o, c in zip(objs, cols, strict=True):
        cons.append(_c(len(cons), type="object", subject=o))
        cons.append(_c(len(cons), type="color", subject=o, value=c))
    return prompt, cons


def _counting(rng: np.random.Generator) -> tuple[str, list[Constraint]]:
    (obj,) = _classes(rng, 1)
    n = int(rng.integers(2, 9))
    form = int(rng.integers(3))
    if form == 0:
        prompt = f"a photo of {NUMBER_WORDS[n]} {plural(obj)}"
    elif form == 1:
        prompt = f"{n} {plural(obj)} on a plain background"
    else:
        prompt = f"exactly {NUMBER_WORDS[n]} {plural(obj)} in a row"
    return prompt, [_c(0, type="count", subject=obj, min_count=n, max_count=n)]


def _position(rng: np.random.Generator) -> tuple[str, list[Constraint]]:
    a, b = _classes(rng, 2)
    rel, words = [
        ("left of", "left of"),
        ("left of", "to the left of"),
        ("right of", "right of"),
        ("right of", "on the right of"),
        ("above", "above"),
        ("below", "below"),
    ][int(rng.integers(6))]
    prompt = f"a photo of {article(a)} {a} {words} {article(b)} {b}"
    return prompt, [
        _c(0, type="object", subject=a),
        _c(1, type="object", subject=b),
        _c(2, type="position", subject=a, value=b, relation=rel),
    ]


_MAKERS = {
    "synthetic_text": _text,
    "synthetic_negation": _negation,
    "synthetic_long": _long,
    "synthetic_binding": _binding,
    "synthetic_counting": _counting,
    "synthetic_position": _position,
}
_ = ConstraintType  # constraint types are given by value above
