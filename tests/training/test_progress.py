"""The training run's progress line: steps of expected, time left under a wall-clock budget, the last validation."""

import io

from keras_transformer.training import progress
from keras_transformer.training.progress import Progress, progress_line


def test_the_line_reads_as_a_progress_bar():
    line = progress_line(1250, 3300, 662, 1090, loss=2.3123, seconds_per_step=0.53,
                         val={"perplexity": 5.123, "f1": 58.444, "loss": 1.9}, estimated=True)
    assert line == ("step 1,250/~3,300   38% [=======>............]  11m02s elapsed, ETA 18m10s  0.53 s/step  "
                    "loss 2.312  val ppl 5.12  val F1 58.44")
    assert progress_line(0, 100, 0, None).startswith("step 0/100    0% [>...................]  0m00s elapsed, ETA ?")
    assert "[====================]" in progress_line(100, 100, 3700, 0)
    assert "1h01m elapsed" in progress_line(100, 100, 3700, 0)


class _Clock:
    now = 0.0

    def __call__(self):
        return self.now


def _progress(monkeypatch, train_steps, max_seconds, interactive):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(progress, "optimizer_step", lambda optimizer: optimizer["step"])
    stream = io.StringIO()
    callback = Progress(train_steps, max_seconds, interactive=interactive, every=50, stream=stream)
    callback.set_model(type("Model", (), {"optimizer": {"step": 100}})())  # resumed at step 100
    callback.on_train_begin()
    return callback, clock, stream


def test_a_time_budget_estimates_the_steps_it_will_buy(monkeypatch):
    callback, clock, stream = _progress(monkeypatch, train_steps=10_000, max_seconds=900, interactive=False)
    clock.now = 60.0
    callback.model.optimizer["step"] = 200  # 100 steps in 60 s: 0.6 s a step, 840 s left -> 1,400 more
    callback.on_train_batch_end(0, {"loss": 3.0})
    callback.on_train_batch_end(0, {"loss": 3.0})
    assert stream.getvalue().splitlines() == [
        "step 200/~1,600   12% [==>.................]  1m00s elapsed, ETA 14m00s  0.60 s/step  loss 3.000"] * 2
    callback.on_epoch_end(0, {"loss": 2.5, "val_perplexity": 9.87})
    assert stream.getvalue().splitlines()[-1].endswith("loss 2.500  val ppl 9.87")
    callback.model.optimizer["step"] = 201
    callback.on_train_batch_end(0, {"loss": 3.0})  # piped: a line every 50 steps only
    assert len(stream.getvalue().splitlines()) == 3


def test_without_a_budget_the_steps_are_the_recipes_and_a_terminal_line_is_rewritten(monkeypatch):
    callback, clock, stream = _progress(monkeypatch, train_steps=300, max_seconds=0, interactive=True)
    clock.now = 10.0
    callback.model.optimizer["step"] = 150
    callback.on_train_batch_end(0, {"loss": 4.0})
    clock.now = 10.5  # within a second: not rewritten
    callback.on_train_batch_end(0, {"loss": 4.0})
    clock.now = 20.0
    callback.model.optimizer["step"] = 300
    callback.on_train_batch_end(0, {"loss": 3.5})
    callback.on_train_end()
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert "step 150/300   50%" in text and "ETA 30s" not in text and "ETA 0m30s" in text

