"""Fixtures for the plotting and dev-BLEU tests: a word-level SentencePiece model on made-up text, tiny models.

Word pieces (every piece starts a word) make an untrained model's output several
words long, so a corpus BLEU of its output against itself is 100, not 0.
"""

import dataclasses
import io

import keras
import numpy as np
import pytest
import sentencepiece as spm

from keras_transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.config import ModelConfig
from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.model import build_model

_WORDS = ("a dog runs over the green field . two men play football in the park near river "
          "ein hund läuft über die grüne wiese zwei männer spielen fußball im park am fluss").split()

# 2 encoder layers, 1 decoder layer: PNG counts tell the kinds apart, and beam search traces fast.
# vocab_size is replaced by the tokenizer's (small_config).
SMALL_CONFIG = ModelConfig(vocab_size=100, d_model=32, d_ff=64, num_heads=4, num_encoder_layers=2,
                           num_decoder_layers=1, max_length=64)


def _sentences(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, rng.integers(3, 9))) for _ in range(n)]


@pytest.fixture(scope="session")
def small_tokenizer(tmp_path_factory):
    """One piece per word of _WORDS (plus the four reserved ids): 34 pieces."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_sentences()), model_writer=model, model_type="word",
                                   vocab_size=64, hard_vocab_limit=False, pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID,
                                   eos_id=EOS_ID, normalization_rule_name="identity", minloglevel=2)
    path = tmp_path_factory.mktemp("tokenizer") / "words.model"
    path.write_bytes(model.getvalue())
    return Tokenizer(path)


@pytest.fixture(scope="session")
def small_config(small_tokenizer):
    return dataclasses.replace(SMALL_CONFIG, vocab_size=small_tokenizer.vocab_size)


@pytest.fixture(scope="session")
def small_model(small_config):
    """Untrained, seeded; shared by the tests that only read it (do not compile or fit it)."""
    keras.utils.set_random_seed(0)
    return build_model(small_config)
