"""keras_transformer: the Transformer of "Attention Is All You Need" in Keras 3.

The layers and the model are written with ``keras.ops``; data, distribution,
decoding and export use TensorFlow. Importing the package selects the
TensorFlow backend unless ``KERAS_BACKEND`` is already set, and keeps
TensorFlow's C++ log noise out of normal output.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer.tf_setup import import_tensorflow_quietly  # noqa: E402

import_tensorflow_quietly()

__version__ = "0.1.0"

# Reserved token ids, shared by the tokenizer, the model and the decoders.
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
