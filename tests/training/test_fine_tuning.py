"""--freeze keeps the named weights bit-identical through training; mixed_float16 scales the loss, skips an update
whose gradients overflow and halves the scale; a resume that would change either is refused by name."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_transformer import precision, training
from keras_transformer.training import freeze as freeze_lib
from keras_transformer.workdir import WorkDir

from tests.synthetic import as_dataset, copy_batches, small_recipe


def _weights(model):
    return {w.path: w.numpy() for w in model.weights}


def _fit(model, batches):
    model.fit(as_dataset(batches), steps_per_epoch=len(batches), epochs=1, shuffle=False, verbose=0)


def test_freeze_names_resolve_to_variable_paths(tiny_recipe):
    model = training.compile_model(small_recipe(tiny_recipe))  # 1+1 layers
    embeddings = freeze_lib.frozen_paths(model, "embeddings")
    assert embeddings == ["shared_embedding/embeddings"]  # also the pre-softmax projection (§3.4)
    layer = freeze_lib.frozen_paths(model, "decoder:0")
    assert layer and all(p.startswith("decoder/layer_0/") for p in layer)
    assert freeze_lib.frozen_paths(model, "decoder/layer_0/cross_attention") == [
        p for p in layer if p.startswith("decoder/layer_0/cross_attention/")]
    for spec, message in (("encoder:1", r"^freeze: encoder:1: the encoder has layers 0-0$"),
                          ("decoder:x", r"^freeze: decoder:x: a stack's layers are encoder:I"),
                          ("decoder/layer_9", r"^freeze: decoder/layer_9 names no trainable variable")):
        with pytest.raises(ValueError, match=message):
            freeze_lib.frozen_paths(model, spec)


@pytest.mark.parametrize("accumulation", [1, 2])
def test_frozen_weights_stay_bit_identical_through_training(tiny_recipe, accumulation):
    recipe = small_recipe(tiny_recipe, freeze="embeddings,encoder:0", warmup_steps=2)
    model = training.compile_model(recipe, accumulation=accumulation)
    assert len(model.trainable_variables) < len(model.weights) and len(model.optimizer.variables) > 1
    before = _weights(model)
    _fit(model, copy_batches(vocab_size=recipe.model.vocab_size, num_batches=2 * accumulation))
    assert int(model.optimizer.iterations.numpy()) == 2
    frozen = set(model.frozen_paths)
    for weight in model.trainable_weights + [w for w in model.weights if w.path.split("/", 1)[1] in frozen]:
        changed = not np.array_equal(weight.numpy(), before[weight.path])
        assert changed == (weight.path.split("/", 1)[1] not in frozen), weight.path


@pytest.mark.parametrize("accumulation", [1, 2])
def test_mixed_float16_skips_an_overflowing_update_and_halves_the_loss_scale(tiny_recipe, accumulation):
    recipe = small_recipe(tiny_recipe, warmup_steps=2)
    try:
        model = training.compile_model(recipe, accumulation=accumulation, policy="mixed_float16")
        optimizer = model.optimizer
        assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        assert model.compute_dtype == "float16" and {w.dtype for w in model.weights} <= {"float32", "int64"}
        batches = copy_batches(vocab_size=recipe.model.vocab_size, num_batches=accumulation)
        before = _weights(model)
        optimizer.dynamic_scale.assign(2.0**60)  # S x loss: the gradients overflow float16 (max 65,504) on the way
        _fit(model, batches)
        assert int(optimizer.iterations.numpy()) == 0 and float(optimizer.dynamic_scale.numpy()) == 2.0**59
        for path, value in _weights(model).items():  # the update was skipped, the weights untouched
            np.testing.assert_array_equal(value, before[path])
        optimizer.dynamic_scale.assign(2.0**8)
        _fit(model, batches)
        assert int(optimizer.iterations.numpy()) == 1 and float(optimizer.dynamic_scale.numpy()) == 2.0**8
        assert int(optimizer.step_counter.numpy()) == 1  # doubled after dynamic_growth_steps clean updates
        changed = [p for p, v in _weights(model).items() if not np.array_equal(v, before[p])]
        assert "transformer/shared_embedding/embeddings" in changed
        assert all(np.isfinite(w.numpy()).all() for w in model.trainable_weights)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_a_float16_run_says_so_logs_its_loss_scale_and_refuses_a_float32_resume(tiny_recipe, tmp_path, monkeypatch,
                                                                                capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setattr(precision, "bfloat16_hardware", lambda strategy, cpuinfo=None: None)
    monkeypatch.setattr(precision, "float16_hardware", lambda strategy: "GPU (compute capability 7.5)")
    recipe = small_recipe(tiny_recipe, train_steps=3, checkpoint_every=3, eval_batches=1, mixed_precision=True)
    batches = copy_batches(vocab_size=recipe.model.vocab_size, num_batches=3)
    datasets = (as_dataset(batches), as_dataset(batches[:1], repeat=False))
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=datasets)
    assert summary.policy == "mixed_float16" and summary.steps == 3
    assert capsys.readouterr().out.splitlines()[0] == (
        "precision: mixed_float16 (float16 compute, float32 weights, dynamic loss scaling) on GPU (compute "
        "capability 7.5), which has no bfloat16")
    assert WorkDir(tmp_path).read_policy() == "mixed_float16"
    events = EventAccumulator(str(tmp_path / "tensorboard" / "train")).Reload()
    assert "loss_scale" in set(events.Tags()["tensors"]) | set(events.Tags()["scalars"])
    assert keras.mixed_precision.dtype_policy().name == "float32"

    monkeypatch.setattr(precision, "float16_hardware", lambda strategy: None)  # another machine: float32
    longer = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, train_steps=6))
    with pytest.raises(ValueError, match=r"^precision: .* was trained under mixed_float16, this machine trains "
                                         r"under float32"):
        training.train(longer, str(tmp_path), strategy="one_device", datasets=datasets, verbose=0)
    frozen = dataclasses.replace(longer, train=dataclasses.replace(longer.train, freeze="embeddings"))
    with pytest.raises(ValueError, match=r"^freeze: .* was trained with --freeze='', this run asks for "
                                         r"'embeddings'"):
        training.train(frozen, str(tmp_path), strategy="one_device", datasets=datasets, verbose=0)
