"""Keras layers of the Transformer, each citing the part of the paper it implements."""

from keras_transformer.layers.attention import MultiHeadAttention, scaled_dot_product_attention
from keras_transformer.layers.decoder import Decoder, DecoderLayer
from keras_transformer.layers.embedding import SharedEmbedding
from keras_transformer.layers.encoder import Encoder, EncoderLayer
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoid_table
from keras_transformer.layers.sublayer import SublayerConnection

__all__ = [
    "Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "LearnedPositionalEmbedding", "MultiHeadAttention",
    "PositionwiseFeedForward", "SharedEmbedding", "SinusoidalPositionalEncoding", "SublayerConnection",
    "scaled_dot_product_attention", "sinusoid_table",
]
