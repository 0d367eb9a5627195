"""A program for tests/test_forkserver.py: prints what it sees of its process as JSON, then exits as told.

``--exit=N`` exits with N, ``--exit=raise`` raises, ``--exit=message`` exits with a message, ``--exit=sleep``
waits to be signalled. The first line of stdin, if ``--read_stdin``, is echoed in the report.
"""

import json
import os
import sys
import time

import keras_transformer  # noqa: F401  (first, as in every program: TensorFlow imported quietly)
import tensorflow as tf

from keras_transformer.tf_setup import init_devices


def main(argv):
    init_devices()  # as the programs do: quietly, before the first op
    report = {
        "argv": argv[1:],
        "argv0": os.path.basename(argv[0]),
        "path0": sys.path[0],
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if k.startswith(("KT_", "TF_", "PYTHON"))},
        "main": __name__,
        "own_module_loaded": "tests.forkserver_probe" in sys.modules,
        "matmul": float(tf.reduce_sum(tf.matmul(tf.ones([64, 64]), tf.ones([64, 64])))),
        "stdout_line_buffered": sys.stdout.line_buffering,
        "stdin": sys.stdin.readline().strip() if "--read_stdin" in argv else None,
    }
    print(json.dumps(report, sort_keys=True), flush=True)
    print("to stderr", file=sys.stderr)
    how = next((a.split("=", 1)[1] for a in argv if a.startswith("--exit=")), "0")
    if how == "raise":
        raise RuntimeError("the probe was told to raise")
    if how == "message":
        sys.exit("the probe was told to exit with a message")
    if how == "sleep":
        time.sleep(600)
    sys.exit(int(how))


if __name__ == "__main__":
    main(sys.argv)
