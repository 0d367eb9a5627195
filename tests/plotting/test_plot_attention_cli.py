"""kt-plot-attention on a small work directory made here (recipe.json, one checkpoint, tokenizer), and on a recipe."""

import dataclasses
import shutil

from PIL import Image

from keras_transformer import recipes
from keras_transformer import training
from keras_transformer.checkpoints import CheckpointState
from keras_transformer.workdir import WorkDir
from tests.support import run_cli


def _plot(*args) -> str:
    return run_cli("plot_attention", *args, timeout=180).stdout.strip()


def test_plots_attention_of_a_work_directory_and_a_learning_rate_curve(small_config, small_tokenizer, tmp_path):
    out = tmp_path / "png"
    assert _plot("--learning_rate_schedule", "--recipe=base", f"--output_dir={out}") == str(
        out / "learning_rate_base.png")

    workdir = tmp_path / "run"
    recipe = dataclasses.replace(recipes.get("tiny"), model=small_config)
    WorkDir(workdir).write_recipe(recipe)
    model = training.compile_model(recipe)  # saved as training saves it: model and optimizer
    CheckpointState(model, str(workdir / "checkpoints")).save(7)
    (workdir / "tokenizer").mkdir()
    shutil.copy(small_tokenizer.model_path, workdir / "tokenizer" / "words.model")
    lines = _plot(f"--model={workdir}", "--sentence=two men play football",
                  "--reference=zwei männer spielen fußball", f"--output_dir={out}").splitlines()
    assert lines[:2] == ["source: two men play football", "target: zwei männer spielen fußball"]
    assert lines[2:] == [str(out / f"{kind}_layer{i}.png") for kind, i in
                         (("encoder", 1), ("encoder", 2), ("decoder", 1), ("cross", 1))]
    assert all(Image.open(path).format == "PNG" for path in lines[2:])
