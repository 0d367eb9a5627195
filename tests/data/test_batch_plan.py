"""The paper's batch by construction (§5.1): the recipe's global budget per update, whatever the devices."""

import dataclasses
import json

import pytest

from keras_transformer import recipes
from keras_transformer.data import batching
from tests.support import run_cli

BASE = recipes.get("base").data  # tokens_per_batch 25000 per side and update, max_length 256


@pytest.mark.parametrize("replicas,accumulation", [(1, 4), (2, 2), (4, 1)])
def test_a_device_budget_derives_the_accumulation_and_keeps_the_update(replicas, accumulation):
    cfg = dataclasses.replace(BASE, max_tokens_per_device=8000)
    plan = batching.plan_batches(cfg, replicas)
    assert (plan.replicas, plan.accumulation, plan.replica_tokens) == (replicas, accumulation, 6250)
    assert plan.tokens_per_update == 25000
    shapes = batching.bucket_shapes(cfg, plan)  # each cell's micro-batch over all replicas
    assert all(b % replicas == 0 and (b // replicas) * max(s, t) <= 6250 for b, s, t in shapes)


def test_without_a_device_budget_the_replicas_split_the_update():
    for replicas in (1, 2, 4, 8):
        plan = batching.plan_batches(BASE, replicas)
        assert plan.accumulation == 1 and plan.tokens_per_update == 25000


def test_explicit_accumulation_and_budget_errors_name_the_field():
    assert batching.plan_batches(BASE, 1, gradient_accumulation_steps=5).replica_tokens == 5000
    with pytest.raises(ValueError, match="^gradient_accumulation_steps: 2 micro-batches on 1 replica"):
        batching.plan_batches(dataclasses.replace(BASE, max_tokens_per_device=8000), 1, 2)
    with pytest.raises(ValueError, match="^max_tokens_per_device: 100 is too small for the longest bucket"):
        batching.plan_batches(dataclasses.replace(BASE, max_tokens_per_device=100), 1)
    with pytest.raises(ValueError, match=r"^tokens_per_batch: 1000 split over 4 replica\(s\) x 1 micro-batches"):
        batching.plan_batches(dataclasses.replace(BASE, tokens_per_batch=1000), 4)


@pytest.mark.slow
def test_one_two_four_replicas_train_on_the_same_tokens_per_update(tmp_path):
    out = run_cli("tests.data.batch_plan_worker", tmp_path, timeout=600)  # a fresh process with 4 logical CPUs
    plans = json.loads(out.stdout.strip().splitlines()[-1])
    assert {k: (v["accumulation"], v["tokens_per_update"]) for k, v in plans.items()} == {
        "1": (4, 4096), "2": (2, 4096), "4": (1, 4096)}  # multi30k: 4096 per update, at most 1024 per device
    for v in plans.values():
        assert v["rows_divisible"] and v["max_batch_tokens"] <= v["replica_tokens"] == 1024
