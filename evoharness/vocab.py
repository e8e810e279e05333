"""The embedded world's vocabulary: the 80 GenEval/COCO object classes, GenEval's colours,
number words and plural forms.

Class names follow ``geneval/object_names.txt`` (the COCO 2017 detection classes with
GenEval's spellings, e.g. ``computer mouse``, ``tv remote``). Colour RGB anchors are the sRGB
values the simulator paints with; the inspector names colours by CIEDE2000 distance in CIELAB
against these anchors.
"""

from __future__ import annotations

CLASSES: tuple[str, ...] = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "computer mouse",
    "tv remote",
    "computer keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
)

#: GenEval's colour names with the sRGB anchors the simulator paints with.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 35),
    "orange": (245, 135, 20),
    "yellow": (245, 220, 30),
    "green": (40, 160, 55),
    "blue": (35, 75, 215),
    "purple": (130, 50, 170),
    "pink": (245, 130, 185),
    "brown": (120, 75, 35),
    "black": (20, 20, 20),
    "white": (245, 245, 245),
}

NUMBER_WORDS: dict[int, str] = {
    0: "zero",
    1: "one",
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    11: "eleven",
    12: "twelve",
}
WORD_NUMBERS: dict[str, int] = {w: n for n, w in NUMBER_WORDS.items()}

_IRREGULAR_PLURALS = {
    "person": "people",
    "sheep": "sheep",
    "skis": "skis",
    "knife": "knives",
    "bus": "buses",
    "couch": "couches",
    "sandwich": "sandwiches",
    "toothbrush": "toothbrushes",
    "wine glass": "wine glasses",
    "glass": "glasses",
    "tennis racket": "tennis rackets",
    "scissors": "scissors",
    "tv": "tvs",
    "bench": "benches",
    "hot dog": "hot dogs",
    "potted plant": "potted plants",
}


def plural(name: str) -> str:
    """English plural of a class name (``"wine glass"`` → ``"wine glasses"``); GenEval's
    counting prompts use these forms."""
    if name in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[name]
    if name.endswith(("s", "x", "ch", "sh")):
        return name + "es"
    if name.endswith("y") and not name.endswith(("ay", "ey", "oy", "uy")):
        return name[:-1] + "ies"
    return name + "s"


#: plural form → class name, for reading prompts. GenEval's own prompts use naive plurals
#: ("persons", "knifes", "benchs", "sandwichs", "toothbrushs"), so those are read too.
PLURALS: dict[str, str] = {
    **{c + "s": c for c in CLASSES if not c.endswith("s")},
    **{plural(c): c for c in CLASSES},
}

_CLASS_SET = frozenset(CLASSES)


def class_of(noun: str) -> str | None:
    """The class ``noun`` names — a class name or one of its plurals (``PLURALS``), compared
    lower-cased with runs of white space collapsed — or None when the embedded world has no
    such class (so its verifier cannot check it). ``class_of("Hot  dogs") == "hot dog"``."""
    w = " ".join(noun.lower().split())
    if w in _CLASS_SET:
        return w
    return PLURALS.get(w)
