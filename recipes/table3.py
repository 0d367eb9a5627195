"""The variant rows (A)-(E) of Table 3, each a one-line change of base.

All rows train for 100K steps like base (Table 3 "train steps"). The paper's
"params ×10^6" column is kept in ``PAPER_PARAMS_MILLIONS`` for the rows that
list one; our closed-form counts run about 2M below it (see base.py).
"""

import dataclasses

from keras_transformer.recipes import base

_B = base.RECIPE


def _variant(name, description, model=None, train=None):
    return dataclasses.replace(
        _B,
        name=name,
        description=f"Table 3 {description}",
        model=dataclasses.replace(_B.model, **(model or {})),
        train=dataclasses.replace(_B.train, **(train or {})),
    )


VARIANTS = (
    # (A): vary h with d_k = d_v = d_model / h, keeping computation constant.
    _variant("table3_a_h1", "(A) h=1, d_k=d_v=512", model=dict(num_heads=1)),
    _variant("table3_a_h4", "(A) h=4, d_k=d_v=128", model=dict(num_heads=4)),
    _variant("table3_a_h16", "(A) h=16, d_k=d_v=32", model=dict(num_heads=16)),
    _variant("table3_a_h32", "(A) h=32, d_k=d_v=16", model=dict(num_heads=32)),
    # (B): reduce the attention key size d_k only (d_v stays 64).
    _variant("table3_b_dk16", "(B) d_k=16", model=dict(d_k=16, d_v=64)),
    _variant("table3_b_dk32", "(B) d_k=32", model=dict(d_k=32, d_v=64)),
    # (C): bigger and smaller models.
    _variant("table3_c_n2", "(C) N=2", model=dict(num_encoder_layers=2, num_decoder_layers=2)),
    _variant("table3_c_n4", "(C) N=4", model=dict(num_encoder_layers=4, num_decoder_layers=4)),
    _variant("table3_c_n8", "(C) N=8", model=dict(num_encoder_layers=8, num_decoder_layers=8)),
    _variant("table3_c_dmodel256", "(C) d_model=256, d_k=d_v=32", model=dict(d_model=256)),
    _variant("table3_c_dmodel1024", "(C) d_model=1024, d_k=d_v=128", model=dict(d_model=1024)),
    _variant("table3_c_dff1024", "(C) d_ff=1024", model=dict(d_ff=1024)),
    _variant("table3_c_dff4096", "(C) d_ff=4096", model=dict(d_ff=4096)),
    # (D): dropout and label smoothing.
    _variant("table3_d_drop0", "(D) P_drop=0.0", model=dict(dropout=0.0)),
    _variant("table3_d_drop2", "(D) P_drop=0.2", model=dict(dropout=0.2)),
    _variant("table3_d_ls0", "(D) eps_ls=0.0", train=dict(label_smoothing=0.0)),
    _variant("table3_d_ls2", "(D) eps_ls=0.2", train=dict(label_smoothing=0.2)),
    # (E): learned positional embedding instead of sinusoids.
    _variant("table3_e_learned", "(E) positional embedding instead of sinusoids", model=dict(positional="learned")),
)

# Table 3, "params ×10^6", for the rows that list it.
PAPER_PARAMS_MILLIONS = {
    "base": 65,
    "big": 213,
    "table3_b_dk16": 58,
    "table3_b_dk32": 60,
    "table3_c_n2": 36,
    "table3_c_n4": 50,
    "table3_c_n8": 80,
    "table3_c_dmodel256": 28,
    "table3_c_dmodel1024": 168,
    "table3_c_dff1024": 53,
    "table3_c_dff4096": 90,
}
