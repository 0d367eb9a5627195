"""--init_from: a new run starts from a work directory's or a SavedModel's weights and tokenizer; a work
directory holding another model or tokenizer is refused before anything is written."""

import dataclasses
import shutil

import numpy as np
import pytest

from keras_transformer import checkpoints, training
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.workdir import WorkDir
from keras_transformer.training import init_from
from keras_transformer import artifacts
from tests.inference.support import inference_recipe, run_cli


def _weights(model):
    return [w.numpy() for w in model.weights]


def _fine_tune_recipe(source):
    recipe = inference_recipe()
    return dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, init_from=str(source)))


@pytest.mark.parametrize("source", ["workdir", "saved_model"])
def test_weights_and_tokenizer_come_from_the_source(trained_workdir, exported, tmp_path, source):
    path = trained_workdir if source == "workdir" else exported
    recipe = _fine_tune_recipe(path)
    assert init_from.prepare_workdir(recipe, tmp_path / "new") is True  # fresh
    copied = tmp_path / "new" / "tokenizer" / f"{tokenizer_lib.cache_key(recipe)}.model"
    assert copied.read_bytes() == (trained_workdir / "tokenizer" / "tiny_inference.model").read_bytes()

    model = training.compile_model(recipe)
    init_from.initial_weights(path, model, recipe)
    has_average = bool(checkpoints.list_checkpoints(WorkDir(trained_workdir).averaged))
    expected, _, _ = artifacts.load_model(
        trained_workdir, "averaged" if source == "workdir" and has_average else "latest")
    for ours, theirs in zip(_weights(model), _weights(expected)):
        np.testing.assert_array_equal(ours, theirs)


def test_a_source_of_another_shape_is_refused(trained_workdir, exported):
    for path in (trained_workdir, exported):
        recipe = _fine_tune_recipe(path)
        recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, d_ff=recipe.model.d_ff * 2))
        with pytest.raises(ValueError, match=r"^d_ff: .* holds a model with d_ff=\d+, this run asks for \d+"):
            init_from.initial_weights(path, training.compile_model(recipe), recipe)


def test_resuming_with_another_shape_or_tokenizer_is_refused_and_writes_nothing(trained_workdir, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(trained_workdir, workdir)
    before = {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file()}
    # Another shape: refused by name, before recipe.json is touched.
    result = run_cli("train", f"--recipe={workdir / 'recipe.json'}", f"--workdir={workdir}", "--d_model=48",
                     check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --d_model: ") and "d_model=32" in lines[0], lines
    # Same shape, but this work directory's tokenizer is not the one the recipe's data would train.
    with pytest.raises(ValueError, match=r"^tokenizer: .* was trained with tokenizer/tiny_inference.model"):
        init_from.prepare_workdir(inference_recipe(), workdir)
    assert {p: p.read_bytes() for p in workdir.rglob("*") if p.is_file()} == before


def _pieces(tokenizer):
    return [p.decode() for p in tokenizer.id_to_piece(list(range(tokenizer.vocab_size))).numpy()]


def test_a_new_vocabulary_keeps_the_rows_of_the_pieces_both_share(trained_workdir, tmp_path, multi30k_text):
    """--new_vocabulary: this run's own tokenizer; a piece of both vocabularies keeps its source row exactly, a new
    piece its fresh initialisation; every other weight is the source's."""
    import keras

    english, german = multi30k_text
    reversed_text = [line[::-1] for line in german[500:] + english[500:]]  # other merges over the same characters
    new = tokenizer_lib.Tokenizer.train(reversed_text, 420, tmp_path / "tok" / "new", sample_lines=2000)
    recipe = _fine_tune_recipe(trained_workdir)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, vocab_size=new.vocab_size),
                                 train=dataclasses.replace(recipe.train, new_vocabulary=True))
    assert init_from.prepare_workdir(recipe, tmp_path / "new") is True
    assert not (tmp_path / "new" / "tokenizer").exists()  # nothing copied: the run trains its own
    keras.utils.set_random_seed(3)
    model = training.compile_model(recipe)
    fresh = model.get_layer("shared_embedding").embeddings.numpy()
    init_from.initial_weights(trained_workdir, model, recipe, new)

    source, _, source_tokenizer = artifacts.load_model(trained_workdir, "latest")
    old_rows = {piece: i for i, piece in enumerate(_pieces(source_tokenizer))}
    ours, theirs = model.get_layer("shared_embedding").embeddings.numpy(), source.embedding.embeddings.numpy()
    kept = 0
    for j, piece in enumerate(_pieces(new)):
        if piece in old_rows:
            np.testing.assert_array_equal(ours[j], theirs[old_rows[piece]])
            kept += 1
        else:
            np.testing.assert_array_equal(ours[j], fresh[j])
    assert 4 < kept < new.vocab_size  # the reserved pieces and the bytes at least; not all
    by_path = {w.path: w.numpy() for w in source.weights}
    for weight in model.weights:
        if "embedding" not in weight.path:
            np.testing.assert_array_equal(weight.numpy(), by_path[weight.path])


def test_another_vocab_size_without_new_vocabulary_is_refused(trained_workdir):
    recipe = _fine_tune_recipe(trained_workdir)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, vocab_size=320))
    with pytest.raises(ValueError, match=r"^vocab_size: .* vocab_size=400, this run asks for 320; --new_vocabulary"):
        init_from.prepare_workdir(recipe, "unused")


def test_targets_the_source_vocabulary_has_no_tag_for_are_refused(trained_workdir):
    recipe = _fine_tune_recipe(trained_workdir)
    recipe = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, target_langs=("de", "fr")))
    with pytest.raises(ValueError, match=r"^target_langs: .*'s vocabulary has no tag for de, fr \(its targets: one, "
                                         r"untagged\); --new_vocabulary"):
        init_from.prepare_workdir(recipe, "unused")
