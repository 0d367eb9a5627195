"""Flags and helpers shared by the entry points."""

from __future__ import annotations

import sys

from absl import app, flags

FLAGS = flags.FLAGS


def define_recipe_flag(default: str = "tiny") -> None:
    flags.DEFINE_string("recipe", default, "Recipe name (see `recipes/`), e.g. tiny, base, big, multi30k.")


def define_data_dir_flag() -> None:
    flags.DEFINE_string(
        "data_dir",
        None,
        "Directory holding the corpora (default: $KT_DATA_DIR, else ../shared/data next to the repository).",
    )


def run(main) -> None:
    """``app.run(main)`` with TensorFlow's devices initialised quietly first."""
    from keras_transformer.runtime import init_devices, silence_native_stderr

    init_devices()
    silence_native_stderr()

    def quiet_main(argv):
        from absl import logging as absl_logging

        if not FLAGS["verbosity"].present:  # --verbosity=0 shows INFO logs
            absl_logging.set_verbosity(absl_logging.WARNING)
        return main(argv)

    app.run(quiet_main)


def load_recipe(name: str):
    """Return the named recipe, or exit with one line naming the flag."""
    import recipes

    try:
        return recipes.get(name)
    except ValueError as e:
        fail(str(e))


def fail_with(error: Exception) -> None:
    """Exit with a config/data error; "field: ..." messages become "--field: ..." when that flag exists."""
    message = str(error)
    name = message.split(":", 1)[0]
    if name.isidentifier() and name in FLAGS:
        message = f"--{message}"
    fail(message)


def fail(message: str) -> None:
    """Exit non-zero with one clear line (the message names the flag or file)."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
