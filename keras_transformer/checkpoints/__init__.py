"""Checkpoint files (task-neutral): a run's state (``state.py``), their health (``health.py``), averaging
(``averaging.py``, §6.1) and the names weights are stored under (``names.py``)."""

from keras_transformer.checkpoints.averaging import average_checkpoints
from keras_transformer.checkpoints.state import (Checkpoint, CheckpointState, best_checkpoints, checkpoint_step,
                                                 checkpoint_write_error, damaged_error, list_checkpoints,
                                                 resolve_checkpoint, restore_weights, resume_point, write_weights)

__all__ = ["Checkpoint", "CheckpointState", "average_checkpoints", "best_checkpoints", "checkpoint_step",
           "checkpoint_write_error", "damaged_error", "list_checkpoints", "resolve_checkpoint", "restore_weights",
           "resume_point", "write_weights"]
