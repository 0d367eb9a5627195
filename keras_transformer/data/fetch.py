"""Fetching a corpus file the tools read (Multi30k's, the WSJ sample) when it is missing: checked, never half there.

    download(url, path, sha256, holding)   ``url`` into ``path`` if its sha256 is the one given
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from absl import logging


def download(url: str, path: Path, expected: Optional[str], holding: str) -> None:
    """Fetches ``url`` into ``path`` when its sha256 is ``expected`` (any, for None); a FileNotFoundError that says
    to point --data_dir at ``holding`` when it cannot. Not ``keras.utils.get_file``: it writes under the final
    name and keeps a file that fails its hash; this writes ``<name>.part`` and renames it once it checks out."""
    logging.info("downloading %s -> %s", url, path)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read()
    except (urllib.error.URLError, OSError) as e:
        raise FileNotFoundError(
            f"{path} is missing and downloading {url} failed ({e}); point --data_dir or KT_DATA_DIR at {holding}"
        ) from None
    got = hashlib.sha256(data).hexdigest()
    if expected is not None and got != expected:
        raise FileNotFoundError(f"{path} is missing and {url} gave {len(data):,} bytes of sha256 {got[:12]}..., not "
                                f"the dataset's {expected[:12]}...; nothing was written")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, path)  # never leaves a truncated file under the final name

