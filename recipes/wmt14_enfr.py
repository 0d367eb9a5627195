"""Transformer base and big on WMT 2014 English->French (§5.1, §6.1; Table 2: 38.1 and 41.8 BLEU).

§5.1: "the significantly larger WMT 2014 English-French dataset consisting of
36M sentences and split tokens into a 32000 word-piece vocabulary". We read it
through TFDS (``wmt14_translate/fr-en``) and use our own shared SentencePiece
BPE tokenizer with a 32000-token vocabulary in place of the paper's word pieces.
Everything else is the En-De recipe: base trains 100K steps (§5.2), big 300K
steps with P_drop = 0.1 instead of En-De's 0.3 (§6.1); checkpoints are averaged
as for En-De, the last 5 for base and the last 20 for big (§6.1).

Closed-form parameter counts with the 32000 vocabulary: base 60,522,496 and
big 209,125,376 (5000 fewer embedding rows than En-De's 37000).
"""

import dataclasses

from keras_transformer.recipes import base, big

_DATA = dataclasses.replace(base.RECIPE.data, target_lang="fr")  # wmt14 en/fr -> TFDS wmt14_translate/fr-en

BASE_ENFR = dataclasses.replace(
    base.RECIPE,
    name="base_enfr",
    description="Transformer base, WMT14 En-Fr (§5.1; Table 2: 38.1 BLEU)",
    model=dataclasses.replace(base.RECIPE.model, vocab_size=32000),  # §5.1: 32000 word pieces; ours are BPE
    data=_DATA,
)

BIG_ENFR = dataclasses.replace(
    big.RECIPE,
    name="big_enfr",
    description="Transformer big, WMT14 En-Fr (§6.1; Table 2: 41.8 BLEU)",
    model=dataclasses.replace(big.RECIPE.model, vocab_size=32000, dropout=0.1),  # §6.1: P_drop 0.1, not 0.3
    data=_DATA,
    # train (300K steps, §5.2) and decode (last 20 checkpoints averaged, §6.1) as big En-De
)

RECIPES = (BASE_ENFR, BIG_ENFR)
