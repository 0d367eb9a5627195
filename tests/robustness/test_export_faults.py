"""kt-export and kt-average under faults: a full disk, a read-only directory, an export over another, --num too
large. Each refusal is exit 2 and one line naming the flag, and leaves no partial export and nothing overwritten.
"""

import contextlib
import os

import pytest

from tests.robustness.support import assert_one_error_line, copy_tree, run_cli, snapshot, tmpfs


@contextlib.contextmanager
def _read_only(path):
    """A read-only directory: a read-only tmpfs under root (which ignores permission bits), else chmod 555."""
    if os.geteuid() == 0:
        with tmpfs(path, "64k", read_only=True) as mounted:
            yield mounted
        return
    path.mkdir()
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


def test_a_full_disk_during_an_export_leaves_nothing_there(trained_workdir, tmp_path):
    with tmpfs(tmp_path / "disk", "100k") as disk:  # the ids-only export (traced in a third of the time) needs more
        result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={disk / 'model'}", "--ids_only")
        assert_one_error_line(result, f"--export_dir: {disk / 'model'}: could not write the SavedModel (No space left "
                                      "on device); nothing was left there")
        assert os.listdir(disk) == []  # neither the export nor its hidden partial folder


def test_a_read_only_export_directory(trained_workdir, tmp_path):
    with _read_only(tmp_path / "ro") as directory:
        result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={directory / 'model'}")
        assert_one_error_line(result, f"--export_dir: {directory / 'model'}: could not write the SavedModel (",
                              "nothing was left there")
        assert os.listdir(directory) == []


@pytest.mark.parametrize("target,needle", [
    ("saved_model", "already holds a SavedModel; remove it or choose another"),
    ("other_files", "exists and is not an empty directory; remove it or choose another"),
])
def test_an_export_over_an_existing_one_or_other_files_is_refused(trained_workdir, exported, tmp_path, target,
                                                                  needle):
    export_dir = copy_tree(exported, tmp_path / "model")
    if target == "other_files":
        (export_dir / "saved_model.pb").unlink()
    before = snapshot(export_dir)
    result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={export_dir}")
    assert_one_error_line(result, f"--export_dir: {export_dir} {needle}")
    assert snapshot(export_dir) == before


def test_kt_average_with_more_checkpoints_asked_for_than_there_are(trained_workdir, tmp_path):
    workdir = copy_tree(trained_workdir, tmp_path / "run")
    before = snapshot(workdir)
    result = run_cli("average", f"--model={workdir}", "--num=8")
    assert_one_error_line(result, f"--num: 8 checkpoints asked for, but {workdir}/checkpoints holds 3 (steps 4, 8, "
                                  "12); give --num=3 or fewer")
    assert snapshot(workdir) == before  # no averaged/ written
