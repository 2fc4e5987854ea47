"""File writing shared by the result files (`bench --json`) and the calibration cache."""
from __future__ import annotations

import json
import os
from typing import Any


def write_json_atomically(data: Any, path: str, **dump_kwargs) -> None:
    """Write `data` as JSON through a temporary file beside `path`, then rename it over `path`:
    an interrupted write (Ctrl-C during a long `--append`) leaves the old file whole. Creates
    the directory (a bare file name: the working directory)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, **dump_kwargs)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
