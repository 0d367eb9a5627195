"""A work directory under faults: refused runs write nothing, one run at a time, resume walks back past damage.

Damage is made by hand on copies: a data shard cut short, an index removed, bytes flipped, a full disk.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from keras_transformer import training
from keras_transformer.checkpoints import health as checkpoint_health
from keras_transformer.training import lock as workdir_lock
from keras_transformer.workdir import WorkDir
from tests.robustness.support import assert_one_error_line, copy_tree, run_cli, snapshot, tmpfs
from tests.synthetic import as_dataset, copy_batches, small_recipe


def _cut_short(prefix):
    data = f"{prefix}.data-00000-of-00001"
    os.truncate(data, os.path.getsize(data) // 2)


def _remove_index(prefix):
    os.remove(f"{prefix}.index")


def _flip_bytes(prefix):
    data = Path(f"{prefix}.data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2: len(raw) // 2 + 64] = bytes(b ^ 0xFF for b in raw[len(raw) // 2: len(raw) // 2 + 64])
    data.write_bytes(bytes(raw))


DAMAGE = {"cut_short": (_cut_short, "its data is cut short"),
          "index_removed": (_remove_index, "ckpt-4.index is missing, its data is there")}


# --- refusals that write nothing -------------------------------------------------------------------------------

@pytest.mark.parametrize("flags,needle", [
    (["--recipe={workdir}/recipe.json", "--d_model=48"],
     "--d_model: {workdir} holds a model with d_model=32, this run asks for 48"),
    (["--recipe=tiny"], "--vocab_size: {workdir} holds a model with vocab_size=400, this run asks for 1000"),
])
def test_another_model_shape_or_recipe_is_refused_and_the_work_directory_is_untouched(trained_workdir, tmp_path,
                                                                                      flags, needle):
    workdir = copy_tree(trained_workdir, tmp_path / "run")
    before = snapshot(workdir)
    result = run_cli("train", *[f.format(workdir=workdir) for f in flags], f"--workdir={workdir}",
                     "--strategy=one_device")
    assert_one_error_line(result, needle.format(workdir=workdir))
    assert snapshot(workdir) == before  # recipe.json too: the original run still resumes and loads


def test_a_second_run_on_a_busy_work_directory_is_refused(trained_workdir, tmp_path):
    workdir = copy_tree(trained_workdir, tmp_path / "run")
    with workdir_lock.hold(workdir) as lock:
        before = snapshot(workdir)
        result = run_cli("train", f"--recipe={workdir / 'recipe.json'}", f"--workdir={workdir}",
                         "--strategy=one_device")
        assert_one_error_line(result, f"--workdir: {workdir} is in use by", f"(pid {os.getpid()} on ",
                              f"lock file {lock})")
        assert snapshot(workdir) == before
    assert not os.path.exists(lock)  # released with the run


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = WorkDir(tmp_path).lock
    lock.write_text(f'{{"pid": {dead.pid}, "host": "{os.uname().nodename}", "started": "2026-01-01 00:00:00", '
                    '"command": "kt-train --workdir=runs/x"}\n')
    notes = []
    with workdir_lock.hold(tmp_path, log=notes.append):
        assert f'"pid": {os.getpid()}' in lock.read_text()
        with pytest.raises(workdir_lock.WorkdirBusy, match=f"pid {os.getpid()}"):
            with workdir_lock.hold(tmp_path):  # a second holder, even in this process
                pass
    assert len(notes) == 1 and f"stale lock of kt-train --workdir=runs/x (pid {dead.pid}" in notes[0]
    assert not lock.exists()


# --- resume walks back past damaged checkpoints ----------------------------------------------------------------

def _recipe(tiny_recipe, **train):
    return small_recipe(tiny_recipe, **dict(dict(train_steps=4, checkpoint_every=2, eval_batches=1), **train))


def _train(recipe, workdir):
    batches = copy_batches(num_batches=5)
    return training.train(recipe, str(workdir), strategy="one_device", verbose=0,
                          datasets=(as_dataset(batches), as_dataset(batches[:1], repeat=False)))


@pytest.fixture(scope="module")
def trained_to_4(tmp_path_factory):
    from keras_transformer import recipes

    workdir = tmp_path_factory.mktemp("walk_back") / "run"
    assert _train(_recipe(recipes.get("tiny")), workdir).steps == 4  # checkpoints 2 and 4
    return workdir


def test_flipped_bytes_are_found_by_reading_the_checkpoint_back(trained_to_4, tmp_path):
    directory = copy_tree(trained_to_4 / "checkpoints", tmp_path / "checkpoints")
    _flip_bytes(str(directory / "ckpt-4"))
    assert checkpoint_health.problem(str(directory / "ckpt-4"), read=False) is None  # the files are all there
    walk = checkpoint_health.walk_back(str(directory))
    assert walk.intact == str(directory / "ckpt-2") and walk.damaged[0][0] == str(directory / "ckpt-4")
    assert walk.damaged[0][1].startswith("its data does not read back (") and "Checksum" in walk.damaged[0][1]


@pytest.mark.parametrize("damage", ["cut_short", "index_removed"])
def test_resume_walks_back_to_the_newest_intact_checkpoint_and_keeps_the_damaged_one(trained_to_4, tiny_recipe,
                                                                                    tmp_path, capsys, damage):
    workdir = copy_tree(trained_to_4, tmp_path / "run")
    damaged = workdir / "checkpoints" / "ckpt-4"
    make, reason = DAMAGE[damage]
    make(str(damaged))
    files = {p.name: p.read_bytes() for p in damaged.parent.glob("ckpt-4.*")}
    summary = _train(_recipe(tiny_recipe), workdir)
    assert (summary.resumed_from, summary.steps) == (2, 4)
    warning = capsys.readouterr().err
    assert f"skipped checkpoint {damaged}: " in warning and reason in warning and f"resuming from {workdir}" in warning
    kept = list(WorkDir(workdir).damaged.glob("*/ckpt-4.*"))
    assert {p.name: p.read_bytes() for p in kept} == files  # moved aside byte for byte, never deleted
    assert checkpoint_health.problem(str(damaged)) is None  # step 4 trained again and written whole


def test_a_work_directory_whose_every_checkpoint_is_damaged_is_refused_and_untouched(trained_to_4, tiny_recipe,
                                                                                    tmp_path):
    workdir = copy_tree(trained_to_4, tmp_path / "run")
    _cut_short(str(workdir / "checkpoints" / "ckpt-4"))
    _remove_index(str(workdir / "checkpoints" / "ckpt-2"))
    before = snapshot(workdir)
    with pytest.raises(ValueError, match=r"no intact checkpoint to resume from \(ckpt-4: its data is cut short.*"
                                         r"ckpt-2: ckpt-2.index is missing"):
        _train(_recipe(tiny_recipe), workdir)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("tool", ["translate", "evaluate"])
def test_inference_on_a_damaged_latest_checkpoint_names_it_and_the_intact_one(trained_workdir, tmp_path, tool):
    workdir = copy_tree(trained_workdir, tmp_path / "run")
    _cut_short(str(workdir / "checkpoints" / "ckpt-12"))
    (tmp_path / "one.txt").write_text("A dog.\n")
    before = snapshot(workdir)
    args = [] if tool == "translate" else [f"--source={tmp_path / 'one.txt'}", f"--reference={tmp_path / 'one.txt'}"]
    result = run_cli(tool, f"--model={workdir}", *args, stdin="A dog.\n")
    assert_one_error_line(result, f"checkpoint {workdir}/checkpoints/ckpt-12 is damaged: its data is cut short",
                          f"the newest intact checkpoint beside it is {workdir}/checkpoints/ckpt-8")
    assert snapshot(workdir) == before


# --- a full disk -----------------------------------------------------------------------------------------------

def test_a_full_disk_during_a_checkpoint_names_it_and_keeps_the_ones_before(tiny_recipe, tmp_path):
    with tmpfs(tmp_path / "disk", "1000k") as disk:  # room for one checkpoint of this model (~660 kB), not two
        with pytest.raises(OSError, match="ckpt-4: could not write this checkpoint .No space left on device.; the "
                                          "checkpoints before it are intact"):
            _train(_recipe(tiny_recipe), disk / "run")
        directory = disk / "run" / "checkpoints"
        assert checkpoint_health.walk_back(str(directory)) == (str(directory / "ckpt-2"), [])
        assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
        assert not WorkDir(disk / "run").lock.exists()
        shutil.rmtree(disk / "run" / "tensorboard")
