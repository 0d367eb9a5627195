"""Training: the model, optimizer, loss and metrics under a ``tf.distribute`` strategy."""

from __future__ import annotations


from keras_transformer.config import Recipe
from keras_transformer.losses import LabelSmoothedCrossEntropy, Perplexity, SmoothedLoss, TokenAccuracy, TokenNLL
from keras_transformer.model import Transformer, build_model
from keras_transformer.schedules import paper_adam


def compile_model(recipe: Recipe, strategy=None) -> Transformer:
    """Build and compile the model of ``recipe`` in the strategy's scope (§5.3, §5.4)."""
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = build_model(recipe.model)
        model.compile(
            optimizer=paper_adam(recipe.model.d_model, recipe.train),
            loss=LabelSmoothedCrossEntropy(recipe.train.label_smoothing),
            metrics=[SmoothedLoss(recipe.train.label_smoothing), TokenNLL(), Perplexity(), TokenAccuracy()],
            jit_compile=recipe.train.jit_compile,
        )
    return model
