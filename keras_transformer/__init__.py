"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3.

The layers and the model are written with ``keras.ops``; data, distribution,
decoding and export use TensorFlow. Importing the package selects the
TensorFlow backend unless ``KERAS_BACKEND`` is already set, and keeps
TensorFlow's C++ log noise out of normal output.
"""

import os
import sys

from keras_transformer.tf_setup import import_tensorflow_quietly, onednn_default

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# oneDNN kernels for training, TensorFlow's own (Eigen) for the programs that only decode
# (tf_setup.onednn_default). Read once, when TensorFlow loads: set TF_ENABLE_ONEDNN_OPTS to choose, and import
# keras_transformer before tensorflow for the default to apply.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", onednn_default(sys.orig_argv))

import_tensorflow_quietly()

__version__ = "0.1.0"

# Reserved token ids, shared by the tokenizer, the model and the decoders.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
