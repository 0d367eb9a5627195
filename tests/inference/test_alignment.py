"""Word alignments (tasks/translation/alignment.py): the subword-to-word mapping on constructed pieces, a model whose
cross-attention is forced, the export's align and translate_with_alignment signatures against a NumPy reading of
the model's attention, kt-translate --alignment, and the refusals."""

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID, artifacts
from keras_transformer.tasks.translation import alignment
from keras_transformer.tasks.translation.module import Translator
from tests.inference.support import run_cli

LINES = ["A man rides a red bike on the street .", "", "two dogs play in the snow .", "A girl ."]
STDIN = "".join(f"{line}\n" for line in LINES)
W = alignment.WORD_START


def _strings(rows):
    return [s.decode() for s in rows.numpy()]


def test_pieces_map_to_words_and_each_pair_is_written_once_sorted():
    source_pieces = [[f"{W}A", f"{W}do", "g", f"{W}runs", ".", "</s>"], [f"{W}", "„", f"{W}Hi", "</s>", "<pad>", "<pad>"]]
    source_ids = [[10, 11, 12, 13, 14, EOS_ID], [15, 16, 17, EOS_ID, PAD_ID, PAD_ID]]
    target_pieces = [[f"{W}Ein", f"{W}Hu", "nd", f"{W}läuft", ".", "</s>"], ["</s>", "<pad>", "<pad>", "<pad>", "<pad>",
                                                                          "<pad>"]]
    target_ids = [[20, 21, 22, 23, 24, EOS_ID], [EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]]
    # target word 0 "Ein" -> source piece 3 (word 2 "runs."); "Hu" -> "A"; "nd" -> "g"; "läuft" -> "do"; "." -> "."
    positions = [[3, 0, 2, 1, 4, 0], [0, 0, 0, 0, 0, 0]]
    out = alignment.pharaoh(tf.constant(source_pieces), tf.constant(source_ids), tf.constant(target_pieces),
                            tf.constant(target_ids), tf.constant(positions))
    assert _strings(out) == ["0-1 1-1 1-2 2-0 2-2", ""]  # the second target is EOS alone: no word
    words = alignment.word_indices(tf.constant(source_pieces), tf.constant(source_ids) > EOS_ID)
    np.testing.assert_array_equal(words, [[0, 1, 1, 2, 2, 2], [0, 0, 1, 1, 1, 1]])  # "▁" "„": one word


def test_a_target_token_is_aligned_to_a_real_source_subword_never_to_eos_or_padding():
    attention = tf.constant([[[0.1, 0.2, 0.6, 0.1], [0.3, 0.1, 0.0, 0.6]]])  # [1, T 2, S 4]: EOS at 2, PAD at 3
    source_ids = tf.constant([[10, 11, EOS_ID, PAD_ID]])
    np.testing.assert_array_equal(alignment.aligned_positions(attention, source_ids), [[1, 0]])


def _pieces(tokenizer_path, text):
    return spm.SentencePieceProcessor(model_file=str(tokenizer_path)).encode(text, out_type=str)


def _words(pieces):
    starts = np.cumsum([p.startswith(W) for p in pieces]) - 1
    return np.maximum(starts, 0).tolist()


def _expected(source_pieces, target_pieces, position_of):
    """The Pharaoh string of target piece t aligned to source piece position_of(t) (EOS last, aligned to nothing)."""
    source_words, target_words = _words(source_pieces), _words(target_pieces)
    pairs = sorted({(source_words[position_of(t)], target_words[t]) for t in range(len(target_pieces))})
    return " ".join(f"{i}-{j}" for i, j in pairs)


@pytest.fixture(scope="module")
def workdir_model(trained_workdir):
    model, recipe, tokenizer = artifacts.load_model(trained_workdir)
    return model, recipe, tokenizer


def test_a_model_whose_attention_is_forced_gets_exactly_that_alignment(workdir_model, monkeypatch):
    """Head 1 attends from target position t to source subword min(t, n - 1) with weight 1; head 0 to subword 0 with
    0.6 (and 0.4 on head 1's): the heads averaged align as head 1, head 0 alone everything to source word 0."""
    model, recipe, tokenizer = workdir_model

    def forced_maps(source_ids, target_in_ids):
        n = tf.reduce_sum(tf.cast(source_ids > EOS_ID, tf.int32), axis=1)  # [B] real subwords
        t = tf.range(tf.shape(target_in_ids)[1])  # [T]
        diagonal = tf.one_hot(tf.minimum(t[None, :], n[:, None] - 1), tf.shape(source_ids)[1])  # [B, T, S]
        first = tf.one_hot(tf.zeros_like(diagonal[..., 0], tf.int32), tf.shape(source_ids)[1])  # [B, T, S]
        return {"cross": [tf.stack([0.6 * first + 0.4 * diagonal, diagonal], axis=1)]}  # 1 layer x [B, H 2, T, S]

    monkeypatch.setattr(model, "attention_maps", forced_maps)
    translator = Translator(model, tokenizer, recipe)
    sources = ["a dog runs over the green field .", "two men play football", "zwei"]
    targets = ["ein hund läuft über die grüne wiese .", "zwei männer spielen fußball im park", ""]
    averaged = translator.align(tf.constant(sources), tf.constant(targets), tf.constant(-1), tf.constant(-1))
    first_head = translator.align(tf.constant(sources), tf.constant(targets), tf.constant(0), tf.constant(0))
    path = tokenizer.model_path
    for i, (source, target) in enumerate(zip(sources, targets)):
        source_pieces, target_pieces = _pieces(path, source), _pieces(path, target)
        n = len(source_pieces)
        assert _strings(averaged["alignment"])[i] == _expected(source_pieces, target_pieces, lambda t: min(t, n - 1))
        assert _strings(first_head["alignment"])[i] == _expected(source_pieces, target_pieces, lambda t: 0)
    assert _strings(averaged["alignment"])[2] == ""  # an empty translation has no word


def test_the_exports_alignment_is_the_argmax_of_the_models_averaged_cross_attention(workdir_model, exported):
    model, _, tokenizer = workdir_model
    loaded = tf.saved_model.load(str(exported))
    options = {"beam_size": tf.constant(4), "alpha": tf.constant(0.6), "extra_length": tf.constant(10)}
    out = loaded.signatures["translate_with_alignment"](inputs=tf.constant(LINES), alignment_layer=tf.constant(0),
                                                        alignment_head=tf.constant(-1), **options)
    kept = [line for line in LINES if line]
    source_ids = tokenizer.tokenize(kept).to_tensor(PAD_ID).numpy()
    source_ids = np.pad(source_ids, [[0, 0], [0, 1]])
    source_ids[np.arange(len(kept)), (source_ids > 0).sum(axis=1)] = EOS_ID  # subwords + EOS, PAD after
    best = loaded.signatures["translate_ids_with_options"](source_ids=tf.constant(source_ids, tf.int32), **options)
    best = best["sequences"].numpy()[:, 0, :]  # [B, T]: EOS, PAD after
    target_in = np.where(best == PAD_ID, PAD_ID, np.concatenate([np.full([len(kept), 1], BOS_ID), best[:, :-1]], 1))
    weights = model.attention_maps(tf.constant(source_ids), tf.constant(target_in))["cross"][0].numpy().mean(axis=1)
    expected = []
    for row, ids, target in zip(weights, source_ids, best):
        real = [s for s, i in enumerate(ids) if i > EOS_ID]
        length = int(np.sum(target > EOS_ID))  # the target's subwords (before EOS, if it has one)
        target_pieces = [tokenizer.id_to_piece(int(i)).numpy().decode() for i in target[:length]]
        source_pieces = [tokenizer.id_to_piece(int(i)).numpy().decode() for i in ids[real]]
        expected.append(_expected(source_pieces, target_pieces, lambda t: int(np.argmax(row[t, real]))))
    assert [a for a, line in zip(_strings(out["alignment"]), LINES) if line] == expected
    assert _strings(out["alignment"])[1] == "" and all(expected)
    free = loaded.signatures["translate_with_options"](inputs=tf.constant(LINES), **options)
    np.testing.assert_array_equal(out["nbest_translations"], free["nbest_translations"])


def test_the_signatures_refuse_a_layer_a_head_or_translations_out_of_range(exported):
    align = tf.saved_model.load(str(exported)).signatures["align"]
    good = {"inputs": tf.constant(["a dog"]), "translations": tf.constant(["ein hund"]),
            "alignment_layer": tf.constant(0), "alignment_head": tf.constant(-1)}
    assert _strings(align(**good)["alignment"]) != [""]
    for change, message in (({"alignment_layer": tf.constant(1)}, "alignment_layer: must be a decoder layer in"),
                            ({"alignment_head": tf.constant(2)}, "alignment_head: must be a head in"),
                            ({"translations": tf.constant(["a", "b"])}, "translations: must hold one string per"),
                            ({"translations": tf.constant(["hund " * 60])}, "translations: must have at most 96")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            align(**dict(good, **change))


def test_kt_translate_writes_each_alignment_after_its_translation(trained_workdir, exported):
    plain = run_cli("translate", f"--model={trained_workdir}", "--extra_length=10", stdin=STDIN).stdout.splitlines()
    aligned = run_cli("translate", f"--model={trained_workdir}", "--extra_length=10", "--alignment",
                      stdin=STDIN).stdout.splitlines()
    assert [line.split(" ||| ")[0] for line in aligned] == plain and aligned[1] == " ||| "
    for source, line in zip(LINES, aligned):
        text, pairs = line.split(" ||| ")
        links = [tuple(map(int, pair.split("-"))) for pair in pairs.split()]
        assert all(i < len(source.split()) and j < len(text.split()) for i, j in links)
        assert {j for _, j in links} == set(range(len(text.split())))  # every target word aligned
    export = run_cli("translate", f"--model={exported}", "--extra_length=10", "--alignment", stdin=STDIN)
    assert export.stdout.splitlines() == aligned
    nbest = run_cli("translate", f"--model={exported}", "--extra_length=10", "--alignment", "--nbest=2",
                    stdin=STDIN).stdout.splitlines()
    assert all(len(line.split(" ||| ")) == 4 for line in nbest) and nbest[0].startswith("0 ||| ")


def test_kt_translate_refuses_alignment_flags_it_cannot_follow(trained_workdir):
    model = f"--model={trained_workdir}"
    for args, message in (([model, "--alignment_head=0"], "--alignment_head: applies with --alignment only"),
                          ([model, "--alignment", "--alignment_layer=1"], "--alignment_layer: must be a decoder"),
                          ([model, "--alignment", "--alignment_head=5"], "--alignment_head: must be a head"),
                          ([f"{model},{trained_workdir}", "--alignment"], "--alignment: ensemble of")):
        result = run_cli("translate", *args, stdin=STDIN, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr
