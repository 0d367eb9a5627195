"""Shared test set-up: quiet TensorFlow, devices initialised once, fixed seeds."""

import os

import pytest

import keras_transformer  # noqa: F401  (selects the TF backend, silences start-up logs)
from keras_transformer.runtime import init_devices

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

init_devices()


@pytest.fixture(autouse=True)
def _seed():
    import keras

    keras.utils.set_random_seed(1234)
    yield


@pytest.fixture
def tiny_recipe():
    import recipes

    return recipes.get("tiny")
