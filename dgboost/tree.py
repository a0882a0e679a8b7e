"""Trees and ensembles as struct-of-arrays.

A :class:`Tree` is a handful of equally long node arrays; child indices are local to
the tree (node 0 is the root, ``-1`` marks "no child"), as in XGBoost's JSON. An
:class:`Ensemble` keeps the same arrays concatenated over all trees plus
``tree_offsets`` so prediction and explanation kernels (CPU or GPU) can walk every
tree from flat arrays, and pickling is cheap.

Split semantics (as XGBoost): a row goes left when ``x < split_value``; a missing
``x`` goes left when ``default_left`` is true.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

__all__ = ["Tree", "Ensemble", "NODE_ARRAYS"]

# name -> dtype of every per-node array, in the order they are stored
NODE_ARRAYS: dict[str, np.dtype] = {
    "left": np.dtype(np.int32),  # left child (local index), -1 for a leaf
    "right": np.dtype(np.int32),  # right child (local index), -1 for a leaf
    "parent": np.dtype(np.int32),  # parent (local index), -1 for the root
    "feature": np.dtype(np.int32),  # split feature, -1 for a leaf
    "split_value": np.dtype(np.float32),  # x < split_value goes left
    "default_left": np.dtype(np.uint8),  # 1: missing values go left
    "gain": np.dtype(np.float32),  # loss change of the split (0 for a leaf)
    "cover": np.dtype(np.float64),  # sum of hessians of the training rows in the node
    "value": np.dtype(np.float32),  # leaf output (eta applied); base weight for inner nodes
}


@dataclass
class Tree:
    """One regression tree; every array has one entry per node.

    Attributes
    ----------
    left, right, parent, feature : ndarray of int32, shape (n_nodes,)
    split_value : ndarray of float32, shape (n_nodes,)
    default_left : ndarray of uint8, shape (n_nodes,)
    gain, value : ndarray of float32, shape (n_nodes,)
    cover : ndarray of float64, shape (n_nodes,)
    split_bin : ndarray of int32, shape (n_nodes,) or None
        The bin index the split was chosen at (training only; not saved).
    """

    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    feature: np.ndarray
    split_value: np.ndarray
    default_left: np.ndarray
    gain: np.ndarray
    cover: np.ndarray
    value: np.ndarray
    split_bin: np.ndarray | None = field(default=None, compare=False)

    def __post_init__(self):
        for name, dtype in NODE_ARRAYS.items():
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))

    @property
    def n_nodes(self) -> int:
        return int(self.left.shape[0])

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    @property
    def n_leaves(self) -> int:
        return int(np.count_nonzero(self.left < 0))

    def depth(self) -> int:
        """Length of the longest root-to-leaf path, in edges."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for i in range(self.n_nodes):  # parents are always numbered before their children
            if self.parent[i] >= 0:
                depth[i] = depth[self.parent[i]] + 1
        return int(depth.max()) if self.n_nodes else 0

    @classmethod
    def leaf(cls, value: float, cover: float) -> "Tree":
        """A tree that is a single leaf."""
        return cls(
            left=[-1],
            right=[-1],
            parent=[-1],
            feature=[-1],
            split_value=[0.0],
            default_left=[0],
            gain=[0.0],
            cover=[cover],
            value=[value],
        )


class Ensemble:
    """All trees of a model as flat node arrays plus per-tree offsets and output groups.

    Parameters
    ----------
    n_groups : int
        Number of outputs (classes for multiclass models, else 1).
    base_margin : ndarray of float64, shape (n_groups,)
        Margin every prediction starts from, before any tree.
    """

    def __init__(self, n_groups: int = 1, base_margin: Sequence[float] | float = 0.0):
        self.n_groups = int(n_groups)
        self.base_margin = np.broadcast_to(np.asarray(base_margin, dtype=np.float64), (self.n_groups,)).copy()
        self.arrays = {name: np.empty(0, dtype=dtype) for name, dtype in NODE_ARRAYS.items()}
        self.tree_offsets = np.zeros(1, dtype=np.int64)
        self.tree_group = np.empty(0, dtype=np.int32)
        self._pending: list[tuple[Tree, int]] = []

    # -- building -------------------------------------------------------------------------
    def append(self, tree: Tree, group: int = 0) -> None:
        """Add one tree for output ``group``."""
        if not 0 <= group < self.n_groups:
            raise ValueError(f"group {group} out of range for {self.n_groups} groups")
        self._pending.append((tree, int(group)))

    def extend(self, trees: Iterable[tuple[Tree, int]]) -> None:
        for tree, group in trees:
            self.append(tree, group)

    def _flush(self) -> None:
        if not self._pending:
            return
        trees = [t for t, _ in self._pending]
        for name in NODE_ARRAYS:
            self.arrays[name] = np.concatenate([self.arrays[name]] + [getattr(t, name) for t in trees])
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        self.tree_offsets = np.concatenate([self.tree_offsets, self.tree_offsets[-1] + np.cumsum(sizes)])
        self.tree_group = np.concatenate([self.tree_group, np.array([g for _, g in self._pending], dtype=np.int32)])
        self._pending = []

    # -- access ---------------------------------------------------------------------------
    def __getattr__(self, name):
        # node arrays read as attributes: ens.left, ens.split_value, ...
        if name in NODE_ARRAYS:
            self._flush()
            return self.arrays[name]
        raise AttributeError(name)

    @property
    def n_trees(self) -> int:
        return int(self.tree_offsets.shape[0] - 1 + len(self._pending))

    @property
    def n_nodes(self) -> int:
        self._flush()
        return int(self.tree_offsets[-1])

    def offsets(self) -> np.ndarray:
        """Start of each tree in the flat arrays plus the total; int64, shape (n_trees + 1,)."""
        self._flush()
        return self.tree_offsets

    def groups(self) -> np.ndarray:
        """Output group of each tree; int32, shape (n_trees,)."""
        self._flush()
        return self.tree_group

    def tree(self, i: int) -> Tree:
        """A copy of tree ``i`` as a :class:`Tree`."""
        self._flush()
        lo, hi = int(self.tree_offsets[i]), int(self.tree_offsets[i + 1])
        return Tree(**{name: self.arrays[name][lo:hi].copy() for name in NODE_ARRAYS})

    def trees(self) -> list[Tree]:
        return [self.tree(i) for i in range(self.n_trees)]

    def slice(self, begin: int, end: int) -> "Ensemble":
        """A new ensemble with trees ``begin:end`` (same groups and base margin)."""
        out = Ensemble(self.n_groups, self.base_margin)
        self._flush()
        for i in range(begin, end):
            out.append(self.tree(i), int(self.tree_group[i]))
        out._flush()
        return out

    def max_depth(self) -> int:
        return max((self.tree(i).depth() for i in range(self.n_trees)), default=0)

    def copy(self) -> "Ensemble":
        return self.slice(0, self.n_trees)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Ensemble):
            return NotImplemented
        self._flush()
        other._flush()
        return (
            self.n_groups == other.n_groups
            and np.array_equal(self.base_margin, other.base_margin)
            and np.array_equal(self.tree_offsets, other.tree_offsets)
            and np.array_equal(self.tree_group, other.tree_group)
            and all(np.array_equal(self.arrays[n], other.arrays[n]) for n in NODE_ARRAYS)
        )

    def __getstate__(self):
        self._flush()
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
