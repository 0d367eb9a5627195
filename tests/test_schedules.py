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
