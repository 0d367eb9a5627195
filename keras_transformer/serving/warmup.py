"""TF Serving's warm-up requests: ``assets.extra/tf_serving_warmup_requests`` in a SavedModel.

    write(export_dir, requests)  requests: [(signature name, {input name: numpy array})]
    read(export_dir) -> the same list (none when the file is absent)
    replay(loaded, export_dir) -> the number of requests run

TF Serving (``--enable_model_warmup``, on by default) runs each request of the
file once as it loads the model, before it reports the model available, so
what the first call of a shape would do (an XLA compilation) is done at load
time. The file is a TFRecord of ``tensorflow_serving.apis.PredictionLog``
protos, each a ``PredictLog`` with a ``PredictRequest`` (at most 1,000 are
read). Writing and reading it needs the ``tensorflow-serving-api`` package
(``pip install -e ".[serving]"``); ``replay`` does in a Python process what TF
Serving does at load time.
"""

from __future__ import annotations

import os
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
INSTALL_HINT = 'pip install -e ".[serving]"'
MAX_REQUESTS = 1000  # TF Serving reads no more (servables/tensorflow/saved_model_warmup_util.cc)

Request = Tuple[str, Dict[str, np.ndarray]]


def serving_apis():
    """TF Serving's (predict_pb2, prediction_log_pb2), or ImportError with one line saying how to install them."""
    try:
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
    except ImportError:
        raise ImportError(f"warm-up requests need the tensorflow-serving-api package; {INSTALL_HINT}") from None
    return predict_pb2, prediction_log_pb2


def write(export_dir, requests: List[Request]) -> str:
    """Write ``requests`` as the export's warm-up file; returns its path. At most ``MAX_REQUESTS``."""
    if len(requests) > MAX_REQUESTS:
        raise ValueError(f"{len(requests)} warm-up requests; TF Serving reads at most {MAX_REQUESTS}")
    predict_pb2, prediction_log_pb2 = serving_apis()
    path = os.path.join(export_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature, inputs in requests:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = signature
            for name, value in inputs.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())
    return path


def read(export_dir) -> List[Request]:
    """The export's warm-up requests, in order; [] without the file."""
    path = os.path.join(export_dir, WARMUP_FILE)
    if not os.path.isfile(path):
        return []
    _, prediction_log_pb2 = serving_apis()
    requests = []
    for record in tf.data.TFRecordDataset(path).take(MAX_REQUESTS):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        requests.append((request.model_spec.signature_name or "serving_default",
                         {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}))
    return requests


def replay(loaded, export_dir) -> int:
    """Run each warm-up request through ``loaded`` (``tf.saved_model.load``'s object), as TF Serving does."""
    requests = read(export_dir)
    for signature, inputs in requests:
        loaded.signatures[signature](**{name: tf.constant(value) for name, value in inputs.items()})
    return len(requests)
