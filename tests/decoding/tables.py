"""Hand-made decoding problems: step functions whose log-probabilities depend only on the previous token."""

import numpy as np
import tensorflow as tf

A, B_, C = 4, 5, 6  # ordinary tokens of the hand-made tables
V = 7


def table_step_fn(transitions):
    """step_fn whose log-probs depend only on the previous token: transitions {prev: {next: p}} (rest ~0)."""
    p = np.full((V, V), 1e-9)
    for prev, row in transitions.items():
        for token, prob in row.items():
            p[prev, token] = prob
    log_p = tf.constant(np.log(p), tf.float32)  # [V, V]
    return lambda token_ids, step, cache, constants: (tf.gather(log_p, token_ids), cache)  # [B*K, V]
