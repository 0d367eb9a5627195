"""The training run's progress line: steps of expected, time left under a wall-clock budget, the last validation."""

import io

from keras_transformer.training import callbacks, progress
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


def _progress(monkeypatch, train_steps, max_seconds, interactive, min_steps=0):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    monkeypatch.setattr(progress, "optimizer_step", lambda optimizer: optimizer["step"])
    stream = io.StringIO()
    callback = Progress(train_steps, max_seconds, interactive=interactive, every=50, stream=stream,
                        min_steps=min_steps)
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


def test_piped_a_step_that_ends_a_validation_epoch_is_printed_once_with_its_scores(monkeypatch):
    callback, clock, stream = _progress(monkeypatch, train_steps=1_000, max_seconds=0, interactive=False)
    callback.set_params({"steps": 100})  # an epoch (a checkpoint and its validation) every 100 steps
    for batch in range(100):  # steps 101 ... 200
        clock.now = batch + 1.0
        callback.model.optimizer["step"] = 101 + batch
        callback.on_train_batch_end(batch, {"loss": 3.0})
    callback.on_epoch_end(0, {"loss": 2.5, "val_perplexity": 9.87})
    lines = stream.getvalue().splitlines()
    assert [line.split("/")[0] for line in lines] == ["step 150", "step 200"]
    assert lines[1].endswith("loss 2.500  val ppl 9.87") and "val ppl" not in lines[0]


def test_a_run_opens_with_a_few_summary_lines_of_its_recipe():
    from keras_transformer import recipes

    lines = progress.recipe_summary(recipes.get("multi30k_demo"), "runs/demo/recipe.json")
    assert lines[0] == "recipe multi30k_demo (translation; all of it in runs/demo/recipe.json)"
    assert lines[1].startswith("  model: 2.3M parameters, 4+4 layers, d_model 128, d_ff 256, 4 heads, pre-LN")
    assert lines[2] == "  data: multi30k en->de, 2,048 tokens per batch, pairs up to 80 subwords"
    assert lines[3].startswith("  budget: 15 minutes or 8,000 steps, whichever comes first (at least 1,000 steps)")
    assert len(lines) == 4  # the precision a run trains under comes first, from the hardware (precision.py)
    # a task's model counts what its class adds: the chart parser's LSTM, classifiers and characters
    chart = progress.recipe_summary(recipes.get("ptb_sample_chart"), "recipe.json")[1]
    assert chart.startswith("  model: 11.5M parameters, 4+0 layers")


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



def test_a_recipes_step_floor_is_the_expected_count_when_the_budget_buys_fewer(monkeypatch):
    callback, clock, stream = _progress(monkeypatch, train_steps=4_000, max_seconds=900, interactive=False,
                                        min_steps=2_000)
    clock.now = 60.0
    callback.model.optimizer["step"] = 200  # the budget buys ~1,600; the floor is 2,000: 1,800 more at 0.6 s
    callback.on_train_batch_end(0, {"loss": 3.0})
    assert stream.getvalue().splitlines() == [
        "step 200/2,000   10% [==>.................]  1m00s elapsed, ETA 18m00s  0.60 s/step  loss 3.000"]


def _stop_at_step(monkeypatch, **kwargs):
    clock, warnings = _Clock(), []
    monkeypatch.setattr(callbacks.time, "monotonic", clock)
    monkeypatch.setattr(callbacks, "optimizer_step", lambda optimizer: optimizer["step"])
    stop = callbacks.StopAtStep(warn=warnings.append, **kwargs)
    stop.set_model(type("Model", (), {"optimizer": {"step": 0}, "stop_training": False})())
    stop.on_train_begin()
    return stop, clock, warnings


def _step(stop, clock, step, now):
    clock.now, stop.model.optimizer["step"] = now, step
    stop.on_train_batch_end(0)
    return stop.model.stop_training


def test_the_time_budget_stops_training_at_or_past_the_step_floor(monkeypatch):
    stop, clock, warnings = _stop_at_step(monkeypatch, train_steps=4_000, max_seconds=900, min_steps=1_000,
                                          forecast_after=50)
    assert not _step(stop, clock, 1, 20.0)  # the first step traces: the speed is timed from its end
    assert not _step(stop, clock, 51, 120.0)  # 2 s a step: ~440 steps in the budget, below the floor
    assert warnings == ["at 2.00 s a step, the 15-minute budget (--max_train_minutes) buys ~441 steps, fewer than "
                        "the 1,000 this recipe needs (--min_train_steps): training on to step 1,000, ~34 minutes "
                        "on this machine (--min_train_steps=0 keeps the budget)"]
    assert not _step(stop, clock, 440, 900.0)  # the budget is spent, the floor not reached
    assert stop.past_budget and not stop.stopped_by_time
    assert _step(stop, clock, 1_000, 2020.0) and stop.stopped_by_time
    fast, clock, warnings = _stop_at_step(monkeypatch, train_steps=4_000, max_seconds=900, min_steps=1_000)
    _step(fast, clock, 1, 20.0)
    _step(fast, clock, 51, 40.0)  # 0.4 s a step: ~2,150 steps, past the floor
    assert not warnings
    assert _step(fast, clock, 2_100, 900.0) and fast.stopped_by_time and not fast.past_budget
