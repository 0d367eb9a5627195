"""The Transformer (§3, Figure 1) as a subclassed ``keras.Model``.

    call((source_ids [B, S], target_in_ids [B, T]))  -> logits [B, T, V]
    encode(source_ids)                               -> memory [B, S, D]
    init_cache(memory)                               -> per-layer key/value cache
    decode_step(token_ids [N], step, cache, memory_mask, extra=None, projection=None, preallocated=False)
                                                     -> (logits [N, V], cache)   N = B or B*K
    build_model(config or recipe)                    -> a built model: the paper's, or its recipe's task's

Source and target share one embedding matrix, which is also the pre-softmax
projection (§3.4); with ``shared_vocabulary=False`` (not in the paper) the source
has its own embedding over its own vocabulary and the target's matrix is the
projection's (Press & Wolf, 2017). Dropout is applied to the sums of embeddings and positional
encodings (§5.4); with ``source_token_dropout`` (not in the paper) training also reads each source piece as
UNK with that probability (``read_as_unknown``; with ``source_token_dropout_alpha`` a rarer piece more often),
and with ``target_token_dropout`` each decoder input piece (a task's context reads the real pieces).
Logits are float32 also under mixed precision.

A task may add to what the decoder reads (not in the paper): a subclass that ``register_task_model`` names for the
task's recipes (the parser's word features, ``tasks/parsing/model.py``) writes the hooks ``source_features`` (added
to the encoder's input embeddings: the chart parser's characters), ``source_context``
(read once from the source), ``context_inputs`` (a vector added to each decoder input of the full pass),
``context_state`` and ``context_step`` (the same, one search step at a time) and ``auxiliary_loss`` (a training
term). The paper's model gives the decoder nothing more (``reads_context`` False).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable, Dict, Optional, Union

import keras
from keras import ops

from keras_transformer import BOS_ID, UNK_ID, losses
from keras_transformer.config import ModelConfig, Recipe
from keras_transformer.layers import masks
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.embedding import SharedEmbedding
from keras_transformer.layers.encoder import BLOCK_ARGS, Encoder
from keras_transformer.layers.positional import make_positional


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    reads_context = False  # whether source_context gives the decoder more than the memory (a task's subclass)
    has_auxiliary_loss = False  # whether auxiliary_loss is ever other than 0
    has_decoder = True  # False for a task's model that reads the encoder alone (the chart parser)
    tokenizer_tables = False  # whether its task fills tables from the tokenizer (``tasks.base.Task.prepare_model``)
    CONFIG_KEYS = ("name", "trainable", "dtype")  # get_config's keys besides "config" that __init__ takes

    def __init__(self, config: Union[ModelConfig, dict], **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ModelConfig(**config)
        self.config = config
        c = config
        if self.has_decoder != bool(c.num_decoder_layers):
            raise ValueError(f"num_decoder_layers: {type(self).__name__} needs "
                             f"{'at least 1' if self.has_decoder else '0'}, got {c.num_decoder_layers}")
        block = {name: getattr(c, name) for name in BLOCK_ARGS if name not in ("d_k", "d_v")}
        block.update(d_k=c.key_dim, d_v=c.value_dim)
        self.embedding = SharedEmbedding(c.vocab_size, c.d_model, name="shared_embedding")  # the target's too
        if not c.shared_vocabulary:  # created after the shared one: a shared model's variables keep their order
            self.own_source_embedding = SharedEmbedding(c.vocab_size, c.d_model, name="source_embedding")
        self.positional = make_positional(c.positional, c.max_length, c.d_model, name="positional")
        self.embedding_dropout = keras.layers.Dropout(c.dropout, name="embedding_dropout")
        self.encoder = Encoder(c.num_encoder_layers, **block, name="encoder")
        if self.has_decoder:
            self.decoder = Decoder(c.num_decoder_layers, **block, name="decoder")
        self.add_context_layers()  # before the seeds below: layers draw their initializers' seeds from one stream
        if c.source_token_dropout or c.source_token_dropout_alpha:  # created last: the other seeds stay as before
            self.token_dropout_seed = keras.random.SeedGenerator(name="source_token_dropout")
        if c.target_token_dropout:  # after the source's: a model without it draws as before
            self.target_dropout_seed = keras.random.SeedGenerator(name="target_token_dropout")
        if c.source_token_dropout_alpha:  # [V] each piece's count c in the training sources (set_piece_counts)
            # float32 under any policy: bfloat16 would neither hold the counts nor compare with the draws
            self.piece_counts = self.add_weight(shape=(c.vocab_size,), initializer="zeros", dtype="float32",
                                                trainable=False, autocast=False, name="source_piece_counts")

    # -- the full (teacher-forced) pass ----------------------------------------------------------

    @property
    def source_embedding(self) -> SharedEmbedding:
        """The source side's E: the shared one (§3.4) or, with separate vocabularies, its own."""
        return self.embedding if self.config.shared_vocabulary else self.own_source_embedding

    def _embed(self, ids, start=0, training=None, embedding=None, extra=None):
        """ids [B, N] -> dropout(E[ids] sqrt(D) + PE[start:start+N] (+ extra [B, N, D])) [B, N, D]; E the
        target's unless given."""
        x = self.positional((self.embedding if embedding is None else embedding)(ids), start=start)
        if extra is not None:
            x = x + ops.cast(extra, x.dtype)
        return self.embedding_dropout(x, training=training)

    @property
    def _source_token_dropout(self) -> bool:
        return bool(self.config.source_token_dropout or self.config.source_token_dropout_alpha)

    def read_as_unknown(self, ids, side="source"):
        """ids [B, S] -> [B, S]: each piece UNK with probability ``source_token_dropout``, or alpha / (alpha + c)
        for a piece seen c times with ``source_token_dropout_alpha`` (``side="target"``: ``target_token_dropout``);
        PAD, BOS and EOS kept."""
        c = self.config
        rate, seed = ((c.source_token_dropout, self.token_dropout_seed) if side == "source" else
                      (c.target_token_dropout, self.target_dropout_seed))
        if side == "source" and c.source_token_dropout_alpha:
            rate = c.source_token_dropout_alpha / (c.source_token_dropout_alpha + ops.take(self.piece_counts, ids))
        drop = keras.random.uniform(ops.shape(ids), seed=seed) < rate  # [B, S]
        drop = ops.logical_and(ops.logical_and(drop, masks.text_pieces(ids)), ops.not_equal(ids, BOS_ID))
        return ops.where(drop, ops.cast(UNK_ID, ids.dtype), ids)

    def encode(self, source_ids, training=None):
        """source_ids [B, S] -> memory [B, S, D]; the mask (and a task's source_features and source_context) read
        the real pieces."""
        read = self.read_as_unknown(source_ids) if training and self._source_token_dropout else source_ids
        x = self._embed(read, training=training, embedding=self.source_embedding,
                        extra=self.source_features(source_ids))
        return self.encoder(x, masks.padding_mask(source_ids), training=training)

    def decode(self, target_in_ids, memory, memory_mask, training=None, context=None):
        """target_in_ids [B, T], memory [B, S, D], memory_mask [B, 1, 1, S] -> logits [B, T, V].

        ``context``: ``source_context``'s, given exactly when the model reads one (``reads_context``)."""
        extra = None if context is None else self.context_inputs(target_in_ids, context)  # [B, T, D]
        read = (self.read_as_unknown(target_in_ids, side="target") if training and self.config.target_token_dropout
                else target_in_ids)
        y = self._embed(read, training=training, extra=extra)
        y = self.decoder(y, memory, masks.decoder_self_mask(target_in_ids), memory_mask, training=training)
        return ops.cast(self.embedding.logits(y), "float32")

    def call(self, inputs, training=None):
        return self.forward(inputs, training)[0]

    def forward(self, inputs, training=None):
        """(source_ids [B, S], target_in_ids [B, T]) -> (logits [B, T, V], ``source_context``'s context)."""
        source_ids, target_in_ids = inputs
        memory = self.encode(source_ids, training=training)
        context = self.source_context(source_ids, memory)
        return self.decode(target_in_ids, memory, masks.padding_mask(source_ids), training=training,
                           context=context), context

    def training_statistics(self, source_ids, target_in_ids, target_out_ids, training, label_smoothing):
        """-> (``losses.token_statistics`` of the target tokens [B, T, 4], ``auxiliary_loss``'s term, 0 outside
        training): what the training step sums and ``losses.TokenMetrics`` reports. A task's model that predicts
        something else (the chart parser's spans) returns the statistics of its own predictions."""
        extra = 0.0
        if training and self.has_auxiliary_loss:
            logits, context = self.forward((source_ids, target_in_ids), training=training)  # [B, T, V]
            extra = self.auxiliary_loss(target_in_ids, target_out_ids, context, label_smoothing)
        else:
            logits = self((source_ids, target_in_ids), training=training)  # [B, T, V]
        return losses.token_statistics(target_out_ids, logits, label_smoothing), extra  # [B, T, 4]

    # -- what a task's subclass adds to the decoder's input (none of it in the paper) ------------

    def add_context_layers(self) -> None:
        """Creates the layers a task's subclass adds (called in ``__init__`` after the decoder's); none here."""

    def source_features(self, source_ids):
        """source_ids [B, S] -> [B, S, D] added to the encoder's input embeddings (a subclass's, from the real
        pieces); None: nothing (the paper's model)."""
        return None

    def source_context(self, source_ids, memory):
        """source_ids [B, S], memory [B, S, D] -> what ``context_inputs`` and ``context_step`` read, once per
        sentence ([B, ...] tensors); None: nothing (the paper's model)."""
        return None

    def context_inputs(self, target_in_ids, context):
        """target_in_ids [B, T] -> [B, T, D] added to the full pass's decoder inputs (a subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} reads no context")

    def context_state(self, rows: int):
        """What ``context_step`` carries per hypothesis, for ``rows`` of them, before the first token (a subclass's)."""
        raise NotImplementedError(f"{type(self).__name__} reads no context")

    def context_step(self, token_ids, state, context):
        """token_ids [N], state (before them), context (N = B*K, an item's K rows adjacent) -> ([N, D] added to
        the step's decoder input, the state after them): ``context_inputs`` one position at a time."""
        raise NotImplementedError(f"{type(self).__name__} reads no context")

    def auxiliary_loss(self, target_in_ids, target_out_ids, context, label_smoothing: float):
        """A term added to the training step's summed token losses (``TransformerTrainer``); 0 in the paper."""
        return 0.0

    def set_piece_counts(self, counts):
        """counts [V]: how often each source piece occurs in the training sources (``source_token_dropout_alpha``)."""
        if not self.config.source_token_dropout_alpha:
            raise ValueError("set_piece_counts: the model has no source_token_dropout_alpha")
        self.piece_counts.assign(ops.cast(counts, "float32"))

    # -- incremental decoding --------------------------------------------------------------------

    def init_cache(self, memory):
        """memory [B, S, D] -> per-layer cache: empty self-attention keys/values, projected memory."""
        return self.decoder.init_cache(memory)

    def decode_step(self, token_ids, step, cache, memory_mask, extra=None, projection=None, preallocated=False):
        """token_ids [N] at position ``step`` (scalar) -> (logits [N, V] float32, cache one position longer).

        ``cache`` k, v have N rows; its memory_k, memory_v and ``memory_mask`` one row per item (B rows,
        N = B*K, an item's K hypotheses adjacent; ``DecoderLayer.step``). ``extra`` [N, D]: ``context_step``'s,
        exactly when the model reads a context. ``projection``: E^T [D, V] (``SharedEmbedding.transposed``),
        computed once before the steps. ``preallocated``: k, v are [N, H, T_max, d] and keep that shape,
        position ``step`` written (static shapes, for XLA).
        """
        extra = None if extra is None else extra[:, None, :]
        y = self._embed(token_ids[:, None], start=step, extra=extra)[:, 0, :]  # [N, D]
        y, cache = self.decoder.step(y, cache, memory_mask, step if preallocated else None)
        logits = self.embedding.logits(y, projection)  # [N, V]
        return ops.cast(logits, "float32"), cache

    # -- attention maps for plots (an explicit, separate path) -----------------------------------

    def attention_maps(self, source_ids, target_in_ids):
        """Returns {"encoder": [L x [B, H, S, S]], "decoder": [L x [B, H, T, T]], "cross": [L x [B, H, T, S]]}."""
        source_mask = masks.padding_mask(source_ids)
        self_mask = masks.decoder_self_mask(target_in_ids)
        maps = {"encoder": [], "decoder": [], "cross": []}
        x = self._embed(source_ids, embedding=self.source_embedding)
        for layer in self.encoder.blocks:
            maps["encoder"].append(layer.self_attention.attention_weights(x, x, source_mask))
            x = layer(x, source_mask)
        memory = self.encoder._finish(x)
        context = self.source_context(source_ids, memory)
        y = self._embed(target_in_ids, extra=None if context is None else self.context_inputs(target_in_ids, context))
        for layer in self.decoder.blocks:
            maps["decoder"].append(layer.self_attention.attention_weights(y, y, self_mask))
            h = layer.self_attention_residual(y, sublayer_fn=lambda z: layer.self_attention(z, z, self_mask))
            maps["cross"].append(layer.cross_attention.attention_weights(h, memory, source_mask))
            y = layer(y, memory, self_mask, source_mask)
        return maps

    # -- Keras plumbing --------------------------------------------------------------------------

    def build(self, input_shape=None):
        """Create every weight by running the model once on a tiny batch (makes .keras reload work)."""
        if self.built:
            return
        ids = ops.ones((1, 2), dtype="int32")
        self.call((ids, ids), training=False)
        self.built = True

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    def get_config(self):
        config = super().get_config()
        config["config"] = dataclasses.asdict(self.config)
        return config

    @property
    def inference_class(self) -> type:
        """The class of this model without a training step (``TransformerTrainer`` sets its own)."""
        return type(self)

    @classmethod
    def from_config(cls, config):
        keys = {key for klass in cls.__mro__ for key in vars(klass).get("CONFIG_KEYS", ())}
        return cls(config["config"], **{k: v for k, v in config.items() if k in keys})

    @classmethod
    def from_recipe(cls, recipe: Recipe, **kwargs) -> "Transformer":
        """The model of ``recipe`` (not built); a task's subclass also reads the recipe's own section."""
        return cls(recipe.model, **kwargs)

    @classmethod
    def extra_parameters(cls, recipe: Recipe) -> int:
        """Trainable parameters a task's subclass adds to ``count_parameters(recipe.model)``; 0 here."""
        return 0


# Recipe.task -> choose(recipe) -> the Transformer subclass of that task's recipes (``register_task_model``).
_TASK_MODELS: Dict[str, Callable[[Recipe], type]] = {}


def register_task_model(task: str, choose: Callable[[Recipe], type]) -> None:
    """Has ``build_model(recipe)`` build ``choose(recipe)`` (a ``Transformer`` subclass) for ``task``'s recipes."""
    _TASK_MODELS[task] = choose


def model_class(recipe: Recipe) -> type:
    """The class of a recipe's model: its task's choice, else the paper's ``Transformer``. The tasks register
    theirs when ``keras_transformer.tasks`` is imported, which this does on first need (not at import: the
    tasks build on this module)."""
    if recipe.task not in _TASK_MODELS:
        importlib.import_module("keras_transformer.tasks")
    return _TASK_MODELS.get(recipe.task, lambda recipe: Transformer)(recipe)


def build_model(config: Union[ModelConfig, Recipe], dtype_policy: Optional[str] = None) -> Transformer:
    """A built model (all weights created): the paper's ``Transformer`` of a ``ModelConfig``, or a recipe's
    (``model_class``), under Keras's global dtype policy or ``dtype_policy`` (e.g. "bfloat16": bfloat16 weights
    and compute, the attention and output softmaxes still in float32)."""
    if isinstance(config, ModelConfig):
        return _built(lambda: Transformer(config, name="transformer"), dtype_policy)
    return _built(lambda: model_class(config).from_recipe(config, name="transformer"), dtype_policy)


def build_like(model: Transformer, dtype_policy: Optional[str] = None) -> Transformer:
    """A new built model of ``model``'s class (without a training step) and configuration, its weights fresh, under
    the global dtype policy or ``dtype_policy`` (not ``model``'s)."""
    config = {key: value for key, value in model.get_config().items() if key != "dtype"}
    return _built(lambda: model.inference_class.from_config(config), dtype_policy)


def _built(make, dtype_policy: Optional[str]) -> Transformer:
    previous = keras.config.dtype_policy()
    if dtype_policy is not None:
        keras.config.set_dtype_policy(dtype_policy)  # layers take the global policy as they are created
    try:
        model = make()
        model.build()
    finally:
        keras.config.set_dtype_policy(previous)
    return model


def count_parameters(config: Union[ModelConfig, Recipe]) -> int:
    """Closed-form trainable parameter count of the architecture (biases included, tied softmax); of a recipe's
    model, with what its task's class adds (``Transformer.extra_parameters``).

    attention: W^Q, W^K (D x h d_k + h d_k each), W^V (D x h d_v + h d_v), W^O (h d_v x D + D)
    FFN (Eq. 2): D d_ff + d_ff + d_ff D + D;  LayerNorm: 2D;  embedding: V D (shared, §3.4; twice if not)
    """
    if isinstance(config, Recipe):
        return count_parameters(config.model) + model_class(config).extra_parameters(config)
    D, h, dk, dv = config.d_model, config.num_heads, config.key_dim, config.value_dim
    attention = 2 * (D * h * dk + h * dk) + (D * h * dv + h * dv) + (h * dv * D + D)
    ffn = D * config.d_ff + config.d_ff + config.d_ff * D + D
    norm = 2 * D
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    embeddings = 1 if config.shared_vocabulary else 2
    total = (embeddings * config.vocab_size * D + config.num_encoder_layers * encoder_layer
             + config.num_decoder_layers * decoder_layer)
    if config.positional == "learned":
        total += config.max_length * D
    if config.norm == "pre":
        total += (1 + bool(config.num_decoder_layers)) * norm  # final LayerNorm of each stack
    return total
