"""§5.3, Eq. 3 and the paper's Adam."""

import numpy as np
import pytest

from keras_transformer.config import TrainConfig
from keras_transformer.schedules import NoamSchedule, paper_adam


def eq3(step_num, d_model=512, warmup=4000):
    return d_model**-0.5 * min(step_num**-0.5, step_num * warmup**-1.5)


@pytest.mark.parametrize("step_num", [1, 4000, 100_000])
def test_schedule_equals_eq3(step_num):
    schedule = NoamSchedule(512, 4000)
    # The optimizer passes its 0-based iteration count; step_num = iterations + 1.
    np.testing.assert_allclose(float(schedule(step_num - 1)), eq3(step_num), rtol=1e-6)


def test_peak_is_at_warmup():
    schedule = NoamSchedule(512, 4000)
    values = [float(schedule(s - 1)) for s in (3999, 4000, 4001)]
    assert values[1] > values[0] and values[1] > values[2]
    np.testing.assert_allclose(values[1], 512**-0.5 * 4000**-0.5, rtol=1e-6)


def test_config_round_trip():
    schedule = NoamSchedule(256, 1000, 2.0)
    clone = NoamSchedule.from_config(schedule.get_config())
    assert float(clone(10)) == float(schedule(10))


def test_paper_adam_settings():
    opt = paper_adam(512, TrainConfig())
    assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.98, 1e-9)
    assert isinstance(opt.learning_rate if not callable(opt._learning_rate) else opt._learning_rate, NoamSchedule)


def test_cooldown_multiplier_is_one_then_linear_to_zero():
    from keras_transformer.schedules import cooldown_multiplier

    values = [cooldown_multiplier(p, 0.25) for p in (0.0, 0.75, 0.875, 1.0, 1.2)]
    np.testing.assert_allclose(values, [1.0, 1.0, 0.5, 0.0, 0.0])


def test_cooldown_progress_by_steps_time_and_floor():
    from keras_transformer.training.callbacks import Cooldown

    by_steps = Cooldown(None, 0.2, train_steps=1000)
    assert by_steps.progress(250, elapsed=1e6) == 0.25  # no budget: steps alone
    budget = Cooldown(None, 0.2, train_steps=1000, max_seconds=600)
    assert budget.progress(100, elapsed=300) == 0.5  # the budget ends the run first
    assert budget.progress(900, elapsed=300) == 0.9  # the step count does
    floor = Cooldown(None, 0.2, train_steps=1000, max_seconds=600, min_steps=400)
    assert floor.progress(200, elapsed=900) == 0.5  # past the budget, the floor is the run's end


def test_cooldown_takes_the_optimizer_rate_to_zero_over_the_last_steps():
    import keras

    from keras_transformer.training.callbacks import Cooldown

    optimizer = paper_adam(16, TrainConfig(warmup_steps=2, cooldown=0.5))
    schedule = optimizer._learning_rate
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    rates = []
    record = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda b, logs: rates.append(
        float(schedule(optimizer.iterations))))
    x, y = np.ones((8, 3), "float32"), np.ones((8, 1), "float32")
    model.fit(x, y, batch_size=1, epochs=1, verbose=0, callbacks=[Cooldown(schedule.multiplier, 0.5, 8), record])
    eq3_rates = [float(NoamSchedule(16, 2)(s)) for s in range(8)]
    np.testing.assert_allclose(rates, [r * min(1.0, (1 - s / 8) / 0.5) for s, r in enumerate(eq3_rates)], rtol=1e-6)
    assert NoamSchedule.from_config(schedule.get_config()).cooldown == 0.5
