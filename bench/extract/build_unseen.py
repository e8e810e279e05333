"""Writes ``bench/extract/unseen.jsonl`` from the hand annotations below (issue 30).

Written by hand before the extractor was changed for issue 30 (conventions of
``bench/extract/README.md``, plus ``actions``: the verbs a prompt states, by lemma). Usage:
``python bench/extract/build_unseen.py bench/extract/unseen.jsonl``.
"""

import json
import re
import sys

# prompt | objects (noun=N{colour}[attr,..];...) | relations s>rel>o;... | actions subject>verb>object;... | ignore
ROWS = r"""
a turtle playing with a penguin|turtle;penguin||turtle>play>penguin|
a dog chasing a cat across a lawn|dog;cat||dog>chase>cat|lawn
a brown horse jumping over a white fence|horse{brown};fence{white}||horse>jump>fence|
two boys kicking a red ball|boy=2;ball{red}||boy>kick>ball|
a girl feeding three ducks|girl;duck=3||girl>feed>duck|
a cat jumping over a dog|cat;dog||cat>jump>dog|
a squirrel climbing up a tree|squirrel;tree||squirrel>climb>tree|
a bird flying over a boat|bird;boat||bird>fly>boat|
a man pushing a blue cart|man;cart{blue}||man>push>cart|
a woman carrying two green bags|woman;bag=2{green}||woman>carry>bag|
a fox running under a bridge|fox;bridge||fox>run>bridge|
a child hugging a teddy bear|child;teddy bear||child>hug>teddy bear|
an elephant spraying water on a giraffe|elephant;giraffe||elephant>spray>|water
a chef cutting a green apple on a wooden board|chef;apple{green};board[wooden]|apple>on>board|chef>cut>apple|
two kids mix paint in a plastic bowl|kid=2;bowl[plastic]||kid>mix>|paint
a hand about to release a blue balloon|hand;balloon{blue}||hand>release>balloon|
The wooden spoon and metallic fork mix the fluffy eggs in the glass bowl.|spoon[wooden];fork[metallic];egg=many[fluffy];bowl[glass]|egg>in>bowl|fork>mix>egg|
The glass jar and metallic lid hold the rubber bands on the wooden desk.|jar[glass];lid[metallic];band=many[rubber];desk[wooden]|band>on>desk|lid>hold>band|
The leather belt and wooden hanger hold the fabric dress in place.|belt[leather];hanger[wooden];dress[fabric]||hanger>hold>dress|place
a boy throwing a frisbee to a dog|boy;frisbee;dog||boy>throw>frisbee|
a cat biting a yellow banana|cat;banana{yellow}||cat>bite>banana|
a bear eating a slice of pizza|bear;pizza||bear>eat>pizza|
a dog pulling a sled through the snow|dog;sled||dog>pull>sled|snow
an owl watching a mouse from a branch|owl;mouse;branch||owl>watch>mouse|
a horse sniffing a red bucket|horse;bucket{red}||horse>sniff>bucket|
a girl riding a bicycle past a bench|girl;bicycle;bench||girl>ride>bicycle|
two cows licking a salt block|cow=2;salt block||cow>lick>salt block|
a dog and a cat fighting over a bone|dog;cat;bone||cat>fight>bone|
a child releasing a red kite over a field|child;kite{red}||child>release>kite|field
a smiling woman holding a sparkling umbrella|woman;umbrella[sparkling]||woman>hold>umbrella|
a black cat sitting on top of a gray car|cat{black};car{gray}|cat>above>car||
a lamp standing next to a sofa|lamp;sofa|lamp>next to>sofa||
a vase placed to the left of a clock|vase;clock|vase>left of>clock||
a kitten sleeping under a chair|kitten;chair|kitten>below>chair||
six sparkling sheep|sheep=6[sparkling]|||
a rusty bicycle next to a shiny car|bicycle[rusty];car[shiny]|bicycle>next to>car||
three glittering balloons|balloon=3[glittering]|||
a translucent cup and a wrinkled shirt|cup[translucent];shirt[wrinkled]|||
four muddy boots|boot=4[muddy]|||
a glowing lantern beside a velvety rose|lantern[glowing];rose[velvety]|lantern>next to>rose||
two frosted cakes and a steaming cup|cake=2[frosted];cup[steaming]|||
a polished wooden table with a cracked vase on it|table[polished,wooden];vase[cracked]|vase>on>table||
seven transparent umbrellas|umbrella=7[transparent]|||
a hairy spider on a golden leaf|spider[hairy];leaf{gold}|spider>on>leaf||
five crumpled paper bags|bag=5[crumpled,paper]|||
a dented red truck and a scratched blue car|truck{red}[dented];car{blue}[scratched]|||
a feathery pink hat|hat{pink}[feathery]|||
eight knitted mittens|mitten=8[knitted]|||
"""
out = []
for n, line in enumerate(ROWS.strip().splitlines()):
    prompt, objs, rels, acts, ign = (line.split("|") + [""] * 5)[:5]
    objects = []
    for o in filter(None, objs.split(";")):
        m = re.fullmatch(r"([^=\{\[]+)(?:=(\d+|many))?(?:\{([^}]*)\})?(?:\[([^\]]*)\])?", o)
        assert m, o
        cnt = m.group(2)
        objects.append(
            {
                "noun": m.group(1),
                "count": 1 if cnt is None else (cnt if cnt == "many" else int(cnt)),
                "colors": m.group(3).split(",") if m.group(3) else [],
                "attributes": m.group(4).split(",") if m.group(4) else [],
            }
        )
    relations = [
        dict(zip(("subject", "relation", "object"), r.split(">"), strict=True))
        for r in filter(None, rels.split(";"))
    ]
    actions = []
    for a in filter(None, acts.split(";")):
        s, v, o = a.split(">")
        actions.append({"subject": s, "verb": v, "object": o or None})
    out.append(
        {
            "id": f"unseen30-{n + 1:03d}",
            "source": "hand-written (issue 30)",
            "line": n + 1,
            "category": "verb"
            if actions
            else ("position" if not any(o["attributes"] for o in objects) else "attribute"),
            "prompt": prompt,
            "objects": objects,
            "relations": relations,
            "negations": [],
            "texts": [],
            "ignore": [w for w in ign.split(";") if w],
            "actions": actions,
        }
    )
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
print(len(out))
