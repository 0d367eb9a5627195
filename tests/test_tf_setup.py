"""Which kernels a program runs on: ``tf_setup.onednn_default`` gives the decoding programs TensorFlow's own
(Eigen) kernels and every other program oneDNN's, the decoding programs it names are the ones that exist, and the
shipped export's translations do not depend on the kernels."""

import os
import re
import subprocess
import sys

import pytest

from keras_transformer.data import files
from keras_transformer.tf_setup import DECODING_PROGRAMS, onednn_default
from tests.conftest import REPO_ROOT
from tests.support import environment, run_cli

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/python3", "/venv/bin/kt-translate", "--model=m"], "0"),
    (["python", "/venv/bin/kt-evaluate-parser"], "0"),
    (["python", "-u", "/venv/bin/kt-parse", "--model", "kt-train"], "0"),
    (["python", "-m", "keras_transformer.cli.evaluate", "--split=val"], "0"),
    (["/venv/bin/python3", "/venv/bin/kt-train", "--recipe=tiny"], "1"),
    (["/venv/bin/python3", "/venv/bin/kt-pipeline"], "1"),  # trains, then evaluates in the same process
    (["python", "-m", "keras_transformer.cli.export"], "1"),
    (["python", "-m", "pytest", "tests"], "1"),
    (["python", "-c", "import keras_transformer"], "1"),
    (["python"], "1"),
])
def test_decoding_programs_default_to_tensorflows_own_kernels(argv, expected):
    assert onednn_default(argv) == expected


def test_the_decoding_programs_are_the_console_scripts_that_only_decode():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), encoding="utf-8") as f:
        scripts = dict(re.findall(r'^(kt-[\w-]+) = "([\w.]+):run"$', f.read(), flags=re.M))
    decoding = {}
    for name, module in scripts.items():
        with open(os.path.join(REPO_ROOT, *module.split(".")) + ".py", encoding="utf-8") as f:
            if "common.run(main, decoding=True)" in f.read():
                decoding[name] = module
    assert decoding == DECODING_PROGRAMS


@pytest.mark.slow
def test_a_decoding_program_loads_tensorflow_without_onednn(tmp_path):
    """A fresh interpreter running a script called kt-translate, TF_ENABLE_ONEDNN_OPTS unset: TensorFlow loads with
    oneDNN's kernels off."""
    script = tmp_path / "kt-translate"
    script.write_text("import os\nimport keras_transformer\nfrom tensorflow.python.util import _pywrap_util_port\n"
                      "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], _pywrap_util_port.IsMklEnabled())\n")
    result = subprocess.run([sys.executable, str(script)], env=environment({"TF_ENABLE_ONEDNN_OPTS": None}),
                            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["0", "False"]


@pytest.mark.slow
def test_the_shipped_export_translates_the_same_on_either_kernels(multi30k_dir):
    """kt-translate over the shipped export, 200 test_2016_flickr sentences: TensorFlow's own kernels (the decoding
    programs' default) and oneDNN's give the same translations, byte for byte."""
    lines = "".join(line + "\n" for line in files.read_text(multi30k_dir / "test_2016_flickr.en.gz")[:200])
    outputs = {flag: run_cli("translate", f"--model={SHIPPED}", stdin=lines, env={"TF_ENABLE_ONEDNN_OPTS": flag},
                             timeout=600).stdout for flag in ("0", "1")}
    assert len(outputs["0"].splitlines()) == 200 and outputs["0"] == outputs["1"]
