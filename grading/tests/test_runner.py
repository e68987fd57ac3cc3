"""Where the sandbox's files live by default."""

import os
from pathlib import Path

from grading.engine.runner import sandbox_home


def test_a_traversable_var_dir_holds_the_sandbox_files():
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="th-open-", dir="/var/tmp"))  # /var/tmp is 1777
    try:
        os.chmod(folder, 0o755)
        assert sandbox_home(folder / "var") == (folder / "var").resolve()
    finally:
        shutil.rmtree(folder)


def test_a_var_dir_behind_a_private_folder_moves_to_var_tmp(tmp_path):
    private = tmp_path / "private"
    (private / "checkout" / "var").mkdir(parents=True)
    os.chmod(private, 0o700)
    home = sandbox_home(private / "checkout" / "var")
    assert home.parent.as_posix() == "/var/tmp" and home.name.startswith("takehome-")
    assert home == sandbox_home(private / "checkout" / "var")  # stable for one checkout
    assert home != sandbox_home(private / "other" / "var")
