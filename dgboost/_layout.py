"""Every dtype and record layout shared with the CUDA kernels (mirrors ``kernels/common.cuh``)."""
from __future__ import annotations

import numpy as np

__all__ = ["GRAD_PAIR_INT", "NODE", "PATH_ELEMENT"]

GRAD_PAIR_INT = np.dtype([("g", np.int64), ("h", np.int64)])

NODE = np.dtype([("left", np.int32), ("right", np.int32), ("feature", np.int32),
                 ("split_value", np.float32), ("default_left", np.uint8), ("pad", np.uint8, 3),
                 ("value", np.float32)])

PATH_ELEMENT = np.dtype([("path_idx", np.int32), ("feature", np.int32), ("group", np.int32),
                         ("is_missing_branch", np.uint8), ("pad", np.uint8, 3),
                         ("lower", np.float32), ("upper", np.float32),
                         ("zero_fraction", np.float64), ("v", np.float64)], align=True)
