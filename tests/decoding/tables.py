"""Hand-made decoding problems: step functions whose log-probabilities depend only on the previous token; and a
model made to end sentences."""

import contextlib

import numpy as np
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import greedy_translate_ids

A, B_, C = 4, 5, 6  # ordinary tokens of the hand-made tables
V = 7

# A dip, then near-certainty: at α = 2, A B C EOS (P = 0.49 * 0.6 * 0.999²; log P / lp(4) = -0.545) beats EOS
# (P = 0.5; -0.693), though after step 0 the alive A (log 0.49 / lp(1) = -0.713) looks worse than EOS.
DIP = {BOS_ID: {EOS_ID: 0.5, A: 0.49}, A: {B_: 0.6, C: 0.4}, B_: {C: 0.999}, C: {EOS_ID: 0.999}}
# Greedy takes A (0.6) then EOS: P = 0.24. The best sequence starts with the less likely B: B EOS, P = 0.36.
GARDEN_PATH = {BOS_ID: {A: 0.6, B_: 0.4}, A: {A: 0.3, B_: 0.3, EOS_ID: 0.4}, B_: {EOS_ID: 0.9, A: 0.05, B_: 0.05}}
NEVER_EOS = {prev: {A: 0.7, B_: 0.2, C: 0.1} for prev in range(V)}  # every item runs to its maximum length


def table_step_fn(transitions):
    """step_fn whose log-probs depend only on the previous token: transitions {prev: {next: p}} (rest ~0)."""
    p = np.full((V, V), 1e-9)
    for prev, row in transitions.items():
        for token, prob in row.items():
            p[prev, token] = prob
    log_p = tf.constant(np.log(p), tf.float32)  # [V, V]
    return lambda token_ids, step, cache, constants: (tf.gather(log_p, token_ids), cache)  # [B*K, V]


@contextlib.contextmanager
def eos_prone(model, sources):
    """The random model rarely ends a sentence; within this, 0.12 x the embeddings of the tokens it favours on
    ``sources`` are added to EOS's (the tied softmax, §3.4), so that some items finish (at once) and others fall
    back to alive beams."""
    embeddings = model.embedding.embeddings
    saved = embeddings.numpy()
    favoured = np.unique(greedy_translate_ids(model, sources, 0.0, 6)[0].numpy())
    favoured = favoured[favoured > EOS_ID]
    embeddings.assign(np.concatenate([saved[:EOS_ID], saved[EOS_ID:EOS_ID + 1] + 0.12 * saved[favoured].sum(0),
                                      saved[EOS_ID + 1:]]))
    try:
        yield model
    finally:
        embeddings.assign(saved)
