"""Every kt-* tool's --help says what it does, shows an example and lists its own flags (not only absl's)."""

import re
import tomllib
from pathlib import Path

import pytest

from tests.support import run_cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


@pytest.mark.slow
@pytest.mark.parametrize("tool", sorted(SCRIPTS))
def test_help_describes_the_tool_and_lists_its_flags(tool):
    module = SCRIPTS[tool].split(":")[0]
    done = run_cli(module, "--help", timeout=120)
    first, _, rest = done.stdout.partition("\n")
    assert first.startswith(f"{tool}:")  # what it does, in one line
    assert re.search(rf"^\s+{tool} --", rest, re.M)  # an example
    listed = re.findall(r"^  --(\w+):", done.stdout, re.M)
    assert listed and "helpfull" not in listed and "verbosity" not in listed  # its own flags, not absl's


@pytest.mark.parametrize("tool", ["kt-train", "kt-translate"])  # a training and a decoding program's start-up
def test_a_tool_starts_without_tensorflows_noise(tool):
    done = run_cli(SCRIPTS[tool].split(":")[0], "--help", timeout=120, fresh=True)
    assert done.stdout.startswith(f"{tool}:")
    noise = [line for line in done.stderr.splitlines() if re.search(r"oneDNN|cuda|TensorFlow binary|tensorflow/", line)]
    assert noise == []
