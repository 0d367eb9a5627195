"""SIGTERM and SIGINT during training: stop at the next step, save that step's checkpoint, exit 143 or 130.

A scheduler preempting a job sends SIGTERM (then SIGKILL after a grace period); a user presses Ctrl-C (SIGINT).
Either used to kill ``kt-train`` where it stood, losing every step since the last periodic checkpoint. Around
``model.fit``, :func:`catch_signals` installs handlers that only record the signal; the :class:`StopOnSignal`
callback reads that flag at each batch end (a Python attribute read: no other cost per step) and then

1. saves the optimizer's current step through the run's own ``checkpoints.CheckpointState`` (atomic, as every
   checkpoint is), unless a periodic checkpoint of that step already exists;
2. prints one line naming it::

       interrupted by SIGTERM at step 37: saved runs/x/checkpoints/ckpt-37; run the same command to resume

3. raises :class:`TrainingInterrupted`, a ``SystemExit`` with code 128 + the signal's number (143 for SIGTERM,
   130 for SIGINT): it unwinds ``training.train`` (the work directory's lock is released) and the program exits
   with that code, without a traceback.

The same command then resumes from that checkpoint: training skips ``step * accumulation`` batches of its
deterministic stream, so the resumed run sees the batches an uninterrupted one would, and its weights end
bit-identical (``training.weights_digest``). With gradient accumulation the run stops at the end of the update
under way when the signal came (at most A - 1 more micro-batches): the accumulators live outside checkpoints,
and a checkpoint between micro-batches would hold the dropout generators past the ones the resumed run replays.

After the first signal SIGINT gets its default action back, so a second Ctrl-C stops at once (checkpoints are
written atomically, so one cut short leaves the earlier ones intact); a repeated SIGTERM is only recorded again.
Handlers are installed from the main thread only (Python delivers signals there; a run in another thread keeps
the process's handlers) and the previous ones are restored when training ends, however it ends.

Under ``MultiWorkerMirroredStrategy`` checkpoints are collective, so one worker cannot save on its own signal:
:class:`ClusterStopOnSignal` hands SIGTERM to TensorFlow's ``tf.distribute.experimental.PreemptionCheckpointHandler``,
which has every worker save the same step through the coordination service (SIGTERM to any one worker
checkpoints all); each then exits 143, the chief printing the line. SIGINT keeps its default action there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Iterator, Optional

import keras
import tensorflow as tf

if TYPE_CHECKING:
    from keras_transformer.checkpoints.state import CheckpointState

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(SystemExit):
    """Training stopped on a signal after saving ``step`` at ``path``; exits with code 128 + the signal number."""

    def __init__(self, signum: int, step: int, path: str):
        super().__init__(128 + signum)
        self.signum, self.step, self.path = signum, step, path

    @property
    def message(self) -> str:
        return (f"interrupted by {signal.Signals(self.signum).name} at step {self.step}: saved {self.path}; "
                "run the same command to resume")


class StopOnSignal(keras.callbacks.Callback):
    """Stops training at the batch end after a signal :func:`catch_signals` recorded, saving that step first."""

    def __init__(self, state: CheckpointState):
        super().__init__()
        self.state = state
        self.signum: Optional[int] = None  # set by the signal handler; read at each batch end

    def on_train_batch_end(self, batch, logs=None):
        # At an update's end only: a checkpoint between its micro-batches would hold the dropout generators'
        # states past the micro-batches that the resumed run replays (module docstring).
        if self.signum is not None and self.model.between_updates():
            self.stop()

    def on_test_batch_end(self, batch, logs=None):  # validation between checkpoint intervals: stop there too
        if self.signum is not None:
            self.stop()

    def stop(self) -> None:
        """Save the optimizer's current step (unless a checkpoint of it exists), print the line, raise."""
        from keras_transformer.schedules import optimizer_step

        step = optimizer_step(self.model.optimizer)
        path = os.path.join(self.state.manager.directory, f"ckpt-{step}")
        if path not in self.state.manager.checkpoints:
            path = self.state.save(step)
        interrupted = TrainingInterrupted(self.signum, step, path)
        print(interrupted.message, file=sys.stderr, flush=True)
        raise interrupted


class ClusterStopOnSignal(keras.callbacks.Callback):
    """SIGTERM to any worker of a ``MultiWorkerMirroredStrategy`` cluster checkpoints all of them at one step.

    TensorFlow's ``tf.distribute.experimental.PreemptionCheckpointHandler`` watches SIGTERM on every worker and,
    through the cluster's coordination service, has all workers agree on the batch after which they save
    (every worker must take part in a multi-worker save). Its save is the run's own ``CheckpointState.save``
    of the optimizer's step, and its exit the same line and exit status 143 as a single process's. The check
    at each batch end reads a flag the handler's watcher threads set: no collective op per step. (SIGINT keeps
    its default action under a cluster.)
    """

    def __init__(self, state: CheckpointState, strategy: tf.distribute.Strategy):
        super().__init__()
        self.state, self.saved = state, None
        # The handler restores its manager's newest checkpoint when it starts: an empty directory of its own, so
        # that it never competes with the resume (which walks back past damaged checkpoints) and never saves there.
        scratch = tf.train.CheckpointManager(tf.train.Checkpoint(), os.path.join(state.manager.directory,
                                                                               ".preemption"), max_to_keep=1)
        config = tf.distribute.experimental.TerminationConfig(save_fn=self._save, exit_fn=self._exit)
        self.handler = tf.distribute.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, scratch,
                                                                            termination_config=config)

    def on_train_batch_end(self, batch, logs=None):
        self.handler.save_checkpoint_if_preempted()

    def _save(self, *args, **kwargs):
        from keras_transformer.schedules import optimizer_step

        step = optimizer_step(self.model.optimizer)
        path = os.path.join(self.state.manager.directory, f"ckpt-{step}")
        self.saved = (step, path if path in self.state.manager.checkpoints else self.state.save(step))

    def _exit(self):
        interrupted = TrainingInterrupted(signal.SIGTERM, *self.saved)
        if self.state.is_chief:
            print(interrupted.message, file=sys.stderr, flush=True)
        raise interrupted


def _record(callback: StopOnSignal):
    def handler(signum, frame):
        del frame
        if callback.signum is None:
            callback.signum = signum
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C stops at once

    return handler


@contextlib.contextmanager
def catch_signals(state: CheckpointState, strategy: tf.distribute.Strategy) -> Iterator[list]:
    """Around ``model.fit``: yields the callbacks to add (a :class:`StopOnSignal`, or none where signals are not
    caught: outside the main thread, under ``MultiWorkerMirroredStrategy``).

    Restores the previous handlers on leaving. A signal that came after the last batch end (during the last
    validation or the final save) still stops the program once ``fit`` has returned, the same way.
    """
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        yield [ClusterStopOnSignal(state, strategy)]
        return
    callback = StopOnSignal(state)
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        for signum in SIGNALS:
            signal.signal(signum, _record(callback))
        yield [callback]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    if callback.signum is not None and callback.model is not None:
        callback.stop()
