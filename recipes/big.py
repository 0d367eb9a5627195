"""Transformer (big), Table 3 last row: 213M parameters in the paper.

300K steps, P_drop = 0.3 for En-De (§6.1), last 20 checkpoints averaged.
Closed-form count with a 37,000-token vocabulary: 214,163,456 (see base.py
for how our counts relate to the paper's).
"""

import dataclasses

from keras_transformer.recipes import base

RECIPE = dataclasses.replace(
    base.RECIPE,
    name="big",
    description="Transformer big, WMT14 En-De (Table 3, last row)",
    model=dataclasses.replace(base.RECIPE.model, d_model=1024, d_ff=4096, num_heads=16, dropout=0.3),
    train=dataclasses.replace(base.RECIPE.train, train_steps=300_000),
    decode=dataclasses.replace(base.RECIPE.decode, average_checkpoints=20),  # §6.1
)
