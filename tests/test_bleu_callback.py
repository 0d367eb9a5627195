"""DevBleu: in-graph beam translation equals eager decoding; scores are sacrebleu's; scalars land in TensorBoard."""

import dataclasses
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from keras_transformer import recipes
from keras_transformer import EOS_ID
from keras_transformer.tasks.translation import metric
from keras_transformer.tasks.translation.dev import DevBleu
from keras_transformer.decoding import translate_ids
from keras_transformer.model import build_model
from tests.synthetic import as_dataset, copy_batches

SOURCES = ["a dog runs over the green field .", "two men play football", "the park near the river ."]
REFERENCES = ["ein hund läuft über die grüne wiese .", "zwei männer spielen fußball", "der park am fluss ."]


def _scalars(directory):
    acc = EventAccumulator(directory, size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        out[tag] = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
    for tag in acc.Tags()["scalars"]:
        out[tag] = [(e.step, e.value) for e in acc.Scalars(tag)]
    return out


def test_translate_equals_eager_beam_search_per_sentence(small_model, small_tokenizer, tmp_path):
    dev = DevBleu(small_tokenizer, SOURCES, REFERENCES, str(tmp_path), beam_size=3, alpha=0.6, extra_length=4,
                  batch_size=2)  # two batches, the first padded
    dev.set_model(small_model)
    hypotheses = dev.translate()
    expected = []
    for source in SOURCES:
        ids = np.append(small_tokenizer.tokenize([source])[0].numpy(), EOS_ID)[None]  # [1, S]
        sequences, _ = translate_ids(small_model, ids, 3, 0.6, 4)  # [1, 3, T]
        expected.append(small_tokenizer.detokenize(sequences[:, 0]).numpy()[0].decode())
    assert hypotheses == expected


class _ReferencesAreHypotheses(keras.callbacks.Callback):
    """Before ``dev`` scores an epoch, makes its references the model's current translations."""

    def __init__(self, dev):
        super().__init__()
        self.dev = dev

    def on_epoch_end(self, epoch, logs=None):
        self.dev.references = self.dev.translate()


def test_fit_logs_and_writes_bleu_at_the_optimizer_step(small_config, small_tokenizer, tmp_path):
    model = build_model(dataclasses.replace(small_config, num_encoder_layers=1))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # any loss: DevBleu needs the optimizer step
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss, run_eagerly=True)
    dev = DevBleu(small_tokenizer, SOURCES, ["unused"] * 3, str(tmp_path), beam_size=2, alpha=0.6, extra_length=3,
                  batch_size=2)
    data = as_dataset(copy_batches(vocab_size=small_config.vocab_size, batch_size=4, length=6, num_batches=2))
    history = model.fit(data, epochs=1, steps_per_epoch=2, verbose=0, shuffle=False,
                        callbacks=[_ReferencesAreHypotheses(dev), dev])

    assert max(len(h.split()) for h in dev.references) >= 4  # 4-grams exist: BLEU of the text against itself is 100
    assert dev.last_hypotheses == dev.references
    assert history.history["val_bleu"] == [pytest.approx(100.0)]
    assert history.history["val_chrf"] == [pytest.approx(100.0)]
    assert _scalars(str(tmp_path / "validation")) == {"bleu": [(2, pytest.approx(100.0))],
                                                      "chrf": [(2, pytest.approx(100.0))]}

    # Against real references: exactly evaluation.score of the same decoded strings, written at the same step.
    hypotheses, dev.references, logs = dev.last_hypotheses, REFERENCES, {}
    dev.on_epoch_end(1, logs)
    expected = metric.score(dev.last_hypotheses, REFERENCES)
    assert dev.last_hypotheses == hypotheses and dev.last_scores == expected
    assert logs == {"val_bleu": expected["bleu"], "val_chrf": expected["chrf"]} and expected["chrf"] < 100.0
    written = _scalars(str(tmp_path / "validation"))
    assert written["bleu"][1] == (2, pytest.approx(expected["bleu"]))
    assert written["chrf"][1] == (2, pytest.approx(expected["chrf"]))


def test_from_eval_split_reads_the_first_pairs_and_decode_settings(small_tokenizer, tmp_path):
    (tmp_path / "dev.en").write_text("".join(f"{line}\n" for line in SOURCES), encoding="utf-8")
    (tmp_path / "dev.de").write_text("".join(f"{line}\n" for line in REFERENCES), encoding="utf-8")
    tiny = recipes.get("tiny")
    recipe = dataclasses.replace(tiny, data=dataclasses.replace(tiny.data, corpus="text",
                                                                eval_prefix=str(tmp_path / "dev")))
    dev = DevBleu.from_eval_split(recipe, small_tokenizer, str(tmp_path / "tb"), num_samples=2, data_dir=tmp_path)
    assert dev.sources == SOURCES[:2] and dev.references == REFERENCES[:2]
    assert (dev.beam_size, dev.alpha, dev.extra_length) == (4, 0.6, 50)
    assert os.path.isdir(tmp_path / "tb" / "validation")


def test_mismatched_references_name_the_argument(small_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="references: 1 lines for 3 sources"):
        DevBleu(small_tokenizer, SOURCES, REFERENCES[:1], str(tmp_path))
