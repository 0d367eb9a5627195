"""Hostile input and output for the tools: closed streams, directories for files, damaged gzip and SavedModels,
a full disk under --output, 10,000-word training lines. Each refusal is exit 2 and one line naming the flag or file.
"""

import dataclasses
import gzip
import os
import random
from pathlib import Path

import pytest

from keras_transformer import recipes
from tests.robustness.support import assert_one_error_line, copy_tree, run_cli, snapshot, tmpfs

WORDS = "a the dog cat man woman child runs walks over under grass street red blue big small".split()
WOERTER = "ein der hund katze mann frau kind läuft geht über unter gras straße rot blau groß klein".split()


def _corpus(directory: Path, name: str, pairs: int = 300, long_lines=(), seed: int = 0) -> Path:
    """Aligned gzip files ``name.en.gz``/``name.de.gz`` of short made-up captions; ``long_lines`` become 10,000
    words on each side."""
    rng = random.Random(seed)
    sides = {"en": WORDS, "de": WOERTER}
    for lang, words in sides.items():
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(pairs)]
        for i in long_lines:
            lines[i] = " ".join(rng.choice(words) for _ in range(10_000))
        with gzip.open(directory / f"{name}.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return directory / name


def _damage_gzip(path: Path, how: str) -> None:
    raw = bytearray(path.read_bytes())
    if how == "crc":
        raw[len(raw) // 2] ^= 0xFF  # a flipped byte: the stream or its CRC no longer checks out
    else:
        raw = raw[: len(raw) // 2]  # cut short: no end-of-stream marker
    path.write_bytes(bytes(raw))


# --- kt-translate's streams and files -----------------------------------------------------------------------------

def test_kt_translate_with_stdin_closed(tmp_path):
    result = run_cli("translate", f"--model={tmp_path / 'never_loaded'}", preexec_fn=lambda: os.close(0))
    assert_one_error_line(result, "--input: stdin is closed; give a file with --input=FILE")


def test_kt_translate_with_stdout_closed(tmp_path):
    result = run_cli("translate", f"--model={tmp_path / 'never_loaded'}", stdin="A dog.\n",
                     preexec_fn=lambda: os.close(1))
    assert_one_error_line(result, "--output: stdout is closed; give a file with --output=FILE")


def test_kt_translate_output_naming_a_directory_is_refused_before_any_work(tmp_path):
    result = run_cli("translate", f"--model={tmp_path / 'never_loaded'}", f"--output={tmp_path}", stdin="A dog.\n")
    assert_one_error_line(result, f"--output: {tmp_path} is a directory; give a file name")


@pytest.mark.parametrize("how", ["crc", "cut_short"])
def test_kt_translate_names_a_damaged_gzip_input(tmp_path, how):
    source = _corpus(tmp_path, "src").with_suffix(".en.gz")
    _damage_gzip(source, how)
    result = run_cli("translate", f"--model={tmp_path / 'never_loaded'}", f"--input={source}")
    assert_one_error_line(result, f"--input: {source}: damaged gzip data (")


@pytest.mark.parametrize("victim,needle", [
    ("saved_model.pb", "is a damaged SavedModel: Cannot parse file"),
    ("variables/variables.data-00000-of-00001", "is a damaged SavedModel: in variables/, its data is cut short"),
])
def test_kt_translate_names_a_truncated_saved_model(exported, tmp_path, victim, needle):
    model = copy_tree(exported, tmp_path / "model")
    os.truncate(model / victim, os.path.getsize(model / victim) // 2)
    result = run_cli("translate", f"--model={model}", stdin="A dog.\n")
    assert_one_error_line(result, f"--model: {model} {needle}", "export it again (kt-export)")


def test_a_full_disk_under_output_keeps_the_older_file_whole(exported, tmp_path):
    with tmpfs(tmp_path / "disk", "64k") as disk:
        older = disk / "out.de"
        older.write_text("an older translation the user still needs\n")
        filler = disk / "filler"
        with open(filler, "wb", buffering=0) as f, pytest.raises(OSError):  # fill the disk to the last block
            while True:
                f.write(b"\0" * 4096)
        before = snapshot(disk)
        result = run_cli("translate", f"--model={exported}", f"--output={older}", stdin="A dog.\nTwo men.\n" * 200)
        assert_one_error_line(result, f"--output: {older}: No space left on device")
        assert snapshot(disk) == before  # the older file whole, no partial file left behind


# --- corpora --------------------------------------------------------------------------------------------------------

def _text_flags(prefix, dev):
    return ["--recipe=tiny", f"--train_prefix={prefix}", f"--eval_prefix={dev}", "--vocab_size=320"]


@pytest.mark.parametrize("how", ["crc", "cut_short"])
def test_kt_data_report_names_a_damaged_gzip_corpus(tmp_path, how):
    prefix, dev = _corpus(tmp_path, "train"), _corpus(tmp_path, "dev", pairs=20)
    _damage_gzip(Path(f"{prefix}.de.gz"), how)
    result = run_cli("data_report", *_text_flags(prefix, dev))
    assert_one_error_line(result, f"{prefix}.de.gz: damaged gzip data after line ")


def test_kt_train_on_a_damaged_gzip_corpus_is_refused_and_writes_nothing(tmp_path):
    prefix, dev = _corpus(tmp_path, "train"), _corpus(tmp_path, "dev", pairs=20)
    _damage_gzip(Path(f"{prefix}.en.gz"), "cut_short")
    result = run_cli("train", *_text_flags(prefix, dev), f"--workdir={tmp_path / 'run'}", "--strategy=one_device")
    assert_one_error_line(result, f"{prefix}.en.gz: damaged gzip data after line ")
    assert not (tmp_path / "run").exists()  # a refused fresh run leaves no work directory behind


def test_ten_thousand_word_training_lines_are_filtered_not_fatal(tmp_path):
    from keras_transformer.data import report as data_report

    prefix = _corpus(tmp_path, "train", pairs=600, long_lines=(5, 50, 300))
    tiny = recipes.get("tiny")
    recipe = dataclasses.replace(tiny, model=dataclasses.replace(tiny.model, vocab_size=320),
                                 data=dataclasses.replace(tiny.data, corpus="text", train_prefix=str(prefix),
                                                          tokens_per_batch=512))
    report = data_report.report(recipe, tmp_path / "run")
    assert (report["pairs_read"], report["pairs_kept"], report["pairs_filtered"]) == (600, 597, 3)
    assert report["max_batch_tokens"] <= recipe.data.tokens_per_batch
