"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3.

The layers and the model are written with ``keras.ops``; data, distribution,
decoding and export use TensorFlow. Importing the package selects the
TensorFlow backend unless ``KERAS_BACKEND`` is already set, and keeps
TensorFlow's C++ log noise out of normal output.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow turns its oneDNN kernels (fused matmul + bias, layer norm, softmax) on by default only on CPUs
# with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX; on an AVX2-only CPU it falls back to Eigen, where a float32
# training step of the multi30k model takes ~1.5x as long (docs/benchmarks.md). Read once, when TensorFlow
# loads: set TF_ENABLE_ONEDNN_OPTS=0 to opt out, and import keras_transformer before tensorflow for it to apply.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from keras_transformer.tf_setup import import_tensorflow_quietly  # noqa: E402

import_tensorflow_quietly()

__version__ = "0.1.0"

# Reserved token ids, shared by the tokenizer, the model and the decoders.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
