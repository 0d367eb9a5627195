"""The recipe override flags shared by kt-train, kt-pipeline and kt-data-report: each maps onto its config field,
prefix flags switch to local text, --recipe reads a JSON file, bad values exit 2 with one line naming the flag."""

import dataclasses
import json

import pytest
from absl import flags

from keras_transformer import recipes
from keras_transformer.cli import common


def _resolve(argv, training=True, needs_eval=True):
    """common.resolve_recipe over a fresh set of flags parsed from ``argv``."""
    fv = flags.FlagValues()
    common.define_recipe_override_flags(training=training, flag_values=fv)
    fv(["prog", *argv])
    return common.resolve_recipe(fv, needs_eval=needs_eval)


def _exit_line(argv, capsys, **kwargs):
    """The one stderr line of a refused ``argv`` (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        _resolve(argv, **kwargs)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_own_corpus_with_the_base_model():
    r = _resolve(["--recipe=base", "--train_prefix=data/train", "--eval_prefix=data/dev", "--test_prefix=data/test",
                  "--source_lang=en", "--target_lang=fr", "--vocab_size=32000"])
    base = recipes.get("base")
    assert r.data == dataclasses.replace(base.data, corpus="text", train_prefix="data/train", eval_prefix="data/dev",
                                         test_prefix="data/test", source_lang="en", target_lang="fr")
    assert r.model == dataclasses.replace(base.model, vocab_size=32000)  # the rest of the base model stays
    assert r.train == base.train and r.decode == base.decode and r.name == "base"


def test_unset_flags_keep_the_recipe():
    assert _resolve(["--recipe=multi30k"]) == recipes.get("multi30k")
    assert _resolve(["--recipe=base_enfr"]) == recipes.get("base_enfr")


def test_every_data_flag_sets_its_field():
    r = _resolve(["--recipe=tiny", "--corpus=wmt14", "--source_lang=en", "--target_lang=fr", "--train_split=tr",
                  "--eval_split=newstest2013", "--test_split=newstest2014", "--max_length=100",
                  "--tokens_per_batch=50000", "--max_tokens_per_device=12500", "--bucket_boundaries=8,16,32,100",
                  "--shuffle_buffer=77", "--tokenizer_sample_lines=1234", "--bpe_dropout=0.1", "--vocab_size=32000"])
    assert r.data == dataclasses.replace(
        recipes.get("tiny").data, corpus="wmt14", source_lang="en", target_lang="fr", train_split="tr",
        eval_split="newstest2013", test_split="newstest2014", max_length=100, tokens_per_batch=50000,
        max_tokens_per_device=12500, bucket_boundaries=(8, 16, 32, 100), shuffle_buffer=77,
        tokenizer_sample_lines=1234, bpe_dropout=0.1)
    assert r.model.vocab_size == 32000


def test_one_stack_depth_wins_over_num_layers():
    r = _resolve(["--recipe=tiny", "--num_layers=3", "--num_decoder_layers=1"])
    assert (r.model.num_encoder_layers, r.model.num_decoder_layers) == (3, 1)
    r = _resolve(["--recipe=tiny", "--num_encoder_layers=5"])
    assert (r.model.num_encoder_layers, r.model.num_decoder_layers) == (5, recipes.get("tiny").model.num_decoder_layers)


def test_model_and_training_flags_set_their_fields():
    r = _resolve(["--recipe=tiny", "--d_model=128", "--d_ff=512", "--num_heads=8", "--num_layers=3", "--dropout=0.2",
                  "--attention_dropout=0.15", "--relu_dropout=0.05", "--norm=pre",
                  "--source_token_dropout=0.25", "--target_token_dropout=0.1",
                  "--train_steps=7", "--max_train_minutes=1.5", "--warmup_steps=9", "--learning_rate_scale=0.5",
                  "--label_smoothing=0.2", "--gradient_accumulation_steps=0", "--checkpoint_every=3",
                  "--keep_checkpoints=4", "--bleu_samples=10", "--keep_best_by=val_bleu", "--keep_best=2",
                  "--early_stopping_patience=5", "--init_from=runs/pretrained", "--mixed_precision",
                  "--nojit_compile", "--seed=11"])
    tiny = recipes.get("tiny")
    assert r.model == dataclasses.replace(tiny.model, d_model=128, d_ff=512, num_heads=8, num_encoder_layers=3,
                                          num_decoder_layers=3, dropout=0.2,
                                          attention_dropout=0.15, relu_dropout=0.05, norm="pre",
                                          source_token_dropout=0.25, target_token_dropout=0.1)
    assert r.train == dataclasses.replace(
        tiny.train, train_steps=7, max_train_minutes=1.5, warmup_steps=9, learning_rate_scale=0.5,
        label_smoothing=0.2, gradient_accumulation_steps=0, checkpoint_every=3, keep_checkpoints=4, bleu_samples=10,
        keep_best_by="val_bleu", keep_best=2, early_stopping_patience=5, init_from="runs/pretrained",
        mixed_precision=True, jit_compile=False, seed=11)
    assert _resolve(["--recipe=tiny", "--gradient_accumulation_steps=4"]).train.gradient_accumulation_steps == 4


def test_alpha_grid_sets_the_alphas_the_pipeline_chooses_among():
    assert _resolve(["--recipe=ptb_sample_chart", "--alpha_grid=0,0.1,0.25"]).decode.alpha_grid == (0.0, 0.1, 0.25)
    assert _resolve(["--recipe=multi30k", "--alpha_grid="]).decode.alpha_grid == ()  # α as the recipe gives it
    assert _resolve(["--recipe=multi30k"]).decode == recipes.get("multi30k").decode


def test_kt_data_report_takes_the_data_flags_only():
    fv = flags.FlagValues()
    common.define_recipe_override_flags(training=False, flag_values=fv)
    assert "train_prefix" in fv and "vocab_size" in fv and "max_tokens_per_device" in fv
    assert "d_model" not in fv and "keep_best_by" not in fv and "alpha_grid" not in fv
    r = _resolve(["--recipe=multi30k", "--train_prefix=data/train"], training=False, needs_eval=False)
    assert r.data.corpus == "text" and r.data.eval_prefix is None  # a report needs no validation files


@pytest.mark.parametrize("argv, starts", [
    (["--recipe=nope"], "error: --recipe: 'nope' is neither a known recipe nor a recipe JSON file; known: base,"),
    (["--train_prefix=d/t", "--eval_prefix=d/v", "--corpus=wmt14"], "error: --train_prefix: local files need "
                                                                     "--corpus=text"),
    (["--recipe=base", "--corpus=text"], "error: --train_prefix: required with corpus text"),
    (["--train_prefix=d/t"], "error: --eval_prefix: required with corpus text"),
    (["--corpus=europarl"], "error: --corpus: unknown corpus 'europarl'"),
    (["--source_lang=de", "--target_lang=de"], "error: --target_lang: must differ"),
    (["--max_length=1"], "error: --max_length: must be > 1"),
    (["--tokens_per_batch=10"], "error: --tokens_per_batch: 10 is too small"),
    (["--max_tokens_per_device=-1"], "error: --max_tokens_per_device: must be >= 0"),
    (["--bucket_boundaries=8,x"], "error: --bucket_boundaries: expected comma-separated integers"),
    (["--bucket_boundaries=16,8"], "error: --bucket_boundaries: must be positive and strictly increasing"),
    (["--shuffle_buffer=0"], "error: --shuffle_buffer: must be positive"),
    (["--alpha_grid=0,x"], "error: --alpha_grid: expected comma-separated numbers, got '0,x'"),
    (["--alpha_grid=0.6,-1"], "error: --alpha_grid: "),
    (["--tokenizer_sample_lines=-3"], "error: --tokenizer_sample_lines: must be positive"),
    (["--vocab_size=3"], "error: --vocab_size: must be > 4"),
    (["--num_layers=0"], "error: --num_layers: must be positive"),
    (["--num_decoder_layers=0"], "error: --num_decoder_layers: must be positive"),
    (["--num_heads=5"], "error: --num_heads: d_model=64 is not divisible by num_heads=5"),
    (["--dropout=1.5"], "error: --dropout: must be in [0, 1)"),
    (["--norm=sandwich"], "error: --norm: must be 'post' or 'pre', got 'sandwich'"),
    (["--train_steps=-5"], "error: --train_steps: must be positive"),
    (["--gradient_accumulation_steps=-1"], "error: --gradient_accumulation_steps: must be >= 0"),
    (["--keep_best_by=bleu"],
     "error: --keep_best_by: must be val_loss, val_bleu (translation) or val_f1 (parsing), got 'bleu'"),
    (["--keep_best_by=val_bleu"], "error: --keep_best_by: val_bleu needs bleu_samples > 0"),
    (["--keep_best=0", "--keep_best_by=val_loss"], "error: --keep_best: must be positive"),
    (["--early_stopping_patience=3"], "error: --early_stopping_patience: needs keep_best_by"),
])
def test_bad_values_exit_2_with_one_line_naming_the_flag(argv, starts, capsys):
    assert _exit_line(argv, capsys).startswith(starts)


def test_a_json_recipe_round_trips(tmp_path):
    resolved = _resolve(["--recipe=base_enfr", "--train_prefix=d/t", "--eval_prefix=d/v", "--keep_best_by=val_loss",
                         "--bucket_boundaries=8,16,256", "--max_tokens_per_device=4096"])
    path = tmp_path / "recipe.json"
    path.write_text(resolved.to_json())
    assert _resolve([f"--recipe={path}"]) == resolved
    assert _resolve([f"--recipe={tmp_path}"]) == resolved  # a work directory holding recipe.json
    again = _resolve([f"--recipe={path}", "--train_steps=5"])  # overrides apply on top of the file
    assert again == dataclasses.replace(resolved, train=dataclasses.replace(resolved.train, train_steps=5))


@pytest.mark.parametrize("text,problem", [
    ("{not json", "not a valid recipe JSON file (Expecting property name"),
    (json.dumps({"name": "x"}), "model: missing section"),
    ("[]", "a recipe file holds a JSON object of sections, got list"),
    (json.dumps(dict(recipes.get("tiny").to_dict(), model={"dropout": 2.0})),
     "model.dropout: must be in [0, 1), got 2.0"),
])
def test_a_malformed_json_recipe_names_the_file_and_the_problem(text, problem, tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(text)
    line = _exit_line([f"--recipe={path}"], capsys)
    assert line.startswith(f"error: --recipe: {path}: {problem}"), line
