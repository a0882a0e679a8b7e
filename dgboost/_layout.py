"""Every dtype and record layout shared with the CUDA kernels (mirrors ``kernels/common.cuh``)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "GRAD_PAIR_INT",
    "NODE",
    "PATH_ELEMENT",
    "NODE_RECORD_FIELDS",
    "NODE_FIELDS",
    "FEATURE",
    "SPLIT_BIN",
    "DEFAULT_LEFT",
    "GAIN",
    "LEFT_G",
    "LEFT_H",
    "SUM_G",
    "SUM_H",
    "BEGIN",
    "END",
    "NO_NODE",
]

GRAD_PAIR_INT = np.dtype([("g", np.int64), ("h", np.int64)])

NODE = np.dtype(
    [
        ("left", np.int32),
        ("right", np.int32),
        ("feature", np.int32),
        ("split_value", np.float32),
        ("default_left", np.uint8),
        ("pad", np.uint8, 3),
        ("value", np.float32),
    ]
)

PATH_ELEMENT = np.dtype(
    [
        ("path_idx", np.int32),
        ("feature", np.int32),
        ("group", np.int32),
        ("is_missing_branch", np.uint8),
        ("pad", np.uint8, 3),
        ("lower", np.float32),
        ("upper", np.float32),
        ("zero_fraction", np.float64),
        ("v", np.float64),
    ],
    align=True,
)

# A node record: one int64 row per node of a batch being grown (a level with depthwise
# growth), kept on the backend's device so that levels need no host read. ``gain`` holds
# the bits of a float64. The split fields are -1 / 0 until the node's split is evaluated
# (feature stays -1 for a leaf); feature NO_NODE marks a slot of a whole level under a leaf;
# sums are global (allreduced) quantised (G, H); begin/end are this rank's segment of the
# row order. kernels/common.cuh mirrors these indices (a test compares them).
NODE_RECORD_FIELDS = (
    "feature",
    "split_bin",
    "default_left",
    "gain",
    "left_g",
    "left_h",
    "sum_g",
    "sum_h",
    "begin",
    "end",
)
NODE_FIELDS = len(NODE_RECORD_FIELDS)
(FEATURE, SPLIT_BIN, DEFAULT_LEFT, GAIN, LEFT_G, LEFT_H, SUM_G, SUM_H, BEGIN, END) = range(NODE_FIELDS)
#: ``feature`` of a slot that holds no node (a child of a leaf in a level grown whole).
NO_NODE = -2
