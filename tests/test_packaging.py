"""What `pip install .` puts in site-packages: the package and its recipes as keras_transformer.recipes, no
top-level `recipes` module to collide with another package's, and console scripts that find the recipes from
any directory."""

import os
import subprocess
import sys
import zipfile

import pytest

from tests import support
from tests.conftest import REPO_ROOT

tomllib = pytest.importorskip("tomllib")


def _setuptools():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]


def test_every_package_of_the_tree_is_listed_and_recipes_is_mapped_into_the_package():
    tree = {os.path.relpath(d, REPO_ROOT).replace(os.sep, ".") for d, _, files in
            os.walk(os.path.join(REPO_ROOT, "keras_transformer")) if "__init__.py" in files}
    config = _setuptools()
    assert set(config["packages"]) == tree | {"keras_transformer.recipes"}
    assert config["package-dir"] == {"keras_transformer.recipes": "recipes"}


@pytest.mark.slow
def test_the_wheel_holds_no_top_level_recipes_and_its_tools_find_them_from_anywhere(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", REPO_ROOT, "-w", str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    if built.returncode != 0 and "Could not find a version" in built.stderr:
        pytest.skip("no package index to fetch the build backend from")
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"keras_transformer", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    names = zipfile.ZipFile(wheel).namelist()
    assert "keras_transformer/recipes/multi30k.py" in names and not any(n.startswith("recipes/") for n in names)
    # The installed package from elsewhere: `import recipes` fails, the tools find their recipes.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = support.environment({"PYTHONPATH": str(site)})
    elsewhere = dict(cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert subprocess.run([sys.executable, "-c", "import recipes"], **elsewhere).returncode != 0
    helped = subprocess.run([sys.executable, "-m", "keras_transformer.cli.train", "--recipe=multi30k_demo",
                             "--helpfull"], **elsewhere)
    assert "--max_train_minutes" in helped.stdout and "Traceback" not in helped.stderr, helped.stderr[-2000:]
    listed = subprocess.run([sys.executable, "-c", "from keras_transformer import recipes; print(recipes.__file__)"],
                            **elsewhere)
    assert listed.stdout.strip() == str(site / "keras_transformer" / "recipes" / "__init__.py")
