"""Trees and ensembles as struct-of-arrays.

A :class:`Tree` is a handful of equally long node arrays; child indices are local to
the tree (node 0 is the root, ``-1`` marks "no child"), as in XGBoost's JSON. An
:class:`Ensemble` keeps the same arrays concatenated over all trees plus
``tree_offsets`` so prediction and explanation kernels (CPU or GPU) can walk every
tree from flat arrays, and pickling is cheap.

Split semantics (as XGBoost): a row goes left when ``x < split_value``; a missing
``x`` goes left when ``default_left`` is true. A categorical split (``split_type`` 1) sends
the categories of its set right and every other value left (XGBoost's ``common::Decision``,
docs/design.md §11.4); trees and ensembles without one carry no categorical arrays at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

__all__ = ["Tree", "Ensemble", "NODE_ARRAYS", "CAT_ARRAYS", "categorical_tree_fields"]

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

# name -> dtype of a tree's categorical arrays (XGBoost's names in its JSON in comments)
CAT_ARRAYS: dict[str, np.dtype] = {
    "split_type": np.dtype(np.uint8),  # per node: 0 numerical, 1 categorical ("split_type")
    "cat_segments": np.dtype(np.int64),  # per node: start of its codes in cat_values
    "cat_sizes": np.dtype(np.int64),  # per node: number of its codes (0 for numeric nodes)
    "cat_values": np.dtype(np.int32),  # sorted right-going codes of each categorical node ("categories")
}


def categorical_tree_fields(feature, bits, is_cat) -> dict:
    """A grown tree's categorical arrays (:data:`CAT_ARRAYS`) from its nodes' ``feature``
    (int (n,)), category sets ``bits`` (uint32 (n, words), bit c of word c >> 5) and the
    features' ``is_cat`` (uint8 (F,)); ``{}`` when no node splits on a categorical feature."""
    from ._categorical import words_to_codes

    feature = np.asarray(feature)
    is_cat = np.asarray(is_cat)
    cat_nodes = np.flatnonzero((feature >= 0) & (is_cat[np.maximum(feature, 0)] != 0))
    if not cat_nodes.size:
        return {}
    n = feature.shape[0]
    split_type = np.zeros(n, np.uint8)
    split_type[cat_nodes] = 1
    segments = np.zeros(n, np.int64)
    sizes = np.zeros(n, np.int64)
    values = []
    at = 0
    for i in cat_nodes.tolist():
        codes = words_to_codes(bits[i])
        segments[i], sizes[i] = at, codes.size
        values.append(codes)
        at += codes.size
    return {
        "split_type": split_type,
        "cat_segments": segments,
        "cat_sizes": sizes,
        "cat_values": np.concatenate(values).astype(np.int32),
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
    split_type : ndarray of uint8, shape (n_nodes,), or None
        1 for a categorical split, 0 otherwise; None (with the three below) when no node of
        the tree splits on a categorical feature.
    cat_segments, cat_sizes : ndarray of int64, shape (n_nodes,), or None
        Where each categorical node's codes are in ``cat_values`` (sizes 0 for other nodes).
    cat_values : ndarray of int32, shape (total,), or None
        Each categorical node's right-going category codes, sorted.
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
    split_type: np.ndarray | None = field(default=None, compare=False)
    cat_segments: np.ndarray | None = field(default=None, compare=False)
    cat_sizes: np.ndarray | None = field(default=None, compare=False)
    cat_values: np.ndarray | None = field(default=None, compare=False)

    def __post_init__(self):
        for name, dtype in NODE_ARRAYS.items():
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))
        if self.split_type is not None:
            for name, dtype in CAT_ARRAYS.items():
                setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=dtype))

    @property
    def has_categorical(self) -> bool:
        """Whether some node splits on a categorical feature."""
        return self.split_type is not None and bool(np.any(self.split_type == 1))

    def node_categories(self, node: int) -> np.ndarray:
        """int32 sorted codes that go right at categorical ``node`` (empty for other nodes)."""
        if self.split_type is None:
            return np.empty(0, np.int32)
        begin = int(self.cat_segments[node])
        return self.cat_values[begin : begin + int(self.cat_sizes[node])]

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


def _node_bitsets(cat: dict, lo: int, hi: int, at: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cat_begin int64, cat_words int32, cat_bits uint32) of flat nodes ``lo:hi`` from the flat
    ``CAT_ARRAYS`` ``cat``, their words placed from word ``at`` on (vectorised over the nodes)."""
    split_type = cat["split_type"][lo:hi]
    begin = np.zeros(hi - lo, np.int64)
    words = np.zeros(hi - lo, np.int32)
    nodes = np.flatnonzero(split_type == 1)
    if not nodes.size:
        return begin, words, np.zeros(0, np.uint32)
    seg = cat["cat_segments"][lo:hi][nodes].astype(np.int64)
    size = cat["cat_sizes"][lo:hi][nodes].astype(np.int64)
    values = cat["cat_values"].astype(np.int64)
    node_words = (values[seg + size - 1] >> 5) + 1  # each set is sorted: its last code is its largest
    first = np.concatenate([[0], np.cumsum(node_words)[:-1]])
    begin[nodes], words[nodes] = at + first, node_words
    owner = np.repeat(np.arange(nodes.size), size)
    codes = values[np.repeat(seg, size) + np.arange(int(size.sum())) - np.repeat(np.cumsum(size) - size, size)]
    bits = np.zeros(int(node_words.sum()), np.uint32)
    np.bitwise_or.at(bits, first[owner] + (codes >> 5), np.left_shift(np.uint32(1), (codes & 31).astype(np.uint32)))
    return begin, words, bits


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
        # flat CAT_ARRAYS over all nodes (cat_segments global offsets into cat_values), only
        # once a tree with a categorical split is added; None keeps numeric models as they were
        self.cat_arrays: dict[str, np.ndarray] | None = None
        self._cat_kernel: tuple | None = None

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
        if self.cat_arrays is not None or any(t.split_type is not None for t in trees):
            self._append_categorical(trees)
        for name in NODE_ARRAYS:
            self.arrays[name] = np.concatenate([self.arrays[name]] + [getattr(t, name) for t in trees])
        sizes = np.array([t.n_nodes for t in trees], dtype=np.int64)
        self.tree_offsets = np.concatenate([self.tree_offsets, self.tree_offsets[-1] + np.cumsum(sizes)])
        self.tree_group = np.concatenate([self.tree_group, np.array([g for _, g in self._pending], dtype=np.int32)])
        self._pending = []

    def _append_categorical(self, trees: list[Tree]) -> None:
        """Extend the flat categorical arrays with ``trees`` (zeros for numeric trees)."""
        n_before = int(self.tree_offsets[-1])
        cat = self.cat_arrays
        if cat is None:
            cat = {name: np.zeros(n_before if name != "cat_values" else 0, dt) for name, dt in CAT_ARRAYS.items()}
        parts = {name: [cat[name]] for name in CAT_ARRAYS}
        at = int(cat["cat_values"].shape[0])
        for t in trees:
            n = t.n_nodes
            if t.split_type is None:
                parts["split_type"].append(np.zeros(n, np.uint8))
                parts["cat_segments"].append(np.zeros(n, np.int64))
                parts["cat_sizes"].append(np.zeros(n, np.int64))
                continue
            parts["split_type"].append(t.split_type)
            parts["cat_segments"].append(np.where(t.split_type == 1, t.cat_segments + at, 0))
            parts["cat_sizes"].append(t.cat_sizes)
            parts["cat_values"].append(t.cat_values)
            at += int(t.cat_values.shape[0])
        self.cat_arrays = {name: np.concatenate(parts[name]).astype(dt) for name, dt in CAT_ARRAYS.items()}

    @property
    def has_categorical(self) -> bool:
        """Whether some tree has a categorical split."""
        self._flush()
        return self.cat_arrays is not None and bool(np.any(self.cat_arrays["split_type"] == 1))

    def categorical_kernel_arrays(self) -> tuple | None:
        """(split_type uint8 (N,), cat_begin int64 (N,), cat_words int32 (N,), cat_bits uint32
        (W,)) over all N nodes for prediction kernels, or None without categorical splits.

        Node i's set is ``cat_bits[cat_begin[i] : cat_begin[i] + cat_words[i]]``, bit c of
        word c >> 5 set iff category c goes right; ``cat_words`` is the fewest words that hold
        its largest code (0 for numeric nodes)."""
        if not self.has_categorical:
            return None
        cat = self.cat_arrays
        n = int(cat["split_type"].shape[0])
        done = 0 if self._cat_kernel is None else int(self._cat_kernel[0].shape[0])
        if done < n:  # trees only get appended: the new nodes' sets after the old ones'
            if done:
                _, begin, words, bits = self._cat_kernel
                at = int(bits.shape[0])
            else:
                begin, words, bits, at = np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint32), 0
            new_begin, new_words, new_bits = _node_bitsets(cat, done, n, at)
            self._cat_kernel = (
                cat["split_type"][:n].copy(),
                np.concatenate([begin, new_begin]),
                np.concatenate([words, new_words]),
                np.concatenate([bits, new_bits]) if bits.size + new_bits.size else np.zeros(1, np.uint32),
            )
        return self._cat_kernel

    def categories_of(self, node: int) -> np.ndarray | None:
        """int32 sorted codes that go right at flat node ``node``, or None when it is not a
        categorical split."""
        self._flush()
        cat = self.cat_arrays
        if cat is None or cat["split_type"][node] != 1:
            return None
        begin = int(cat["cat_segments"][node])
        return cat["cat_values"][begin : begin + int(cat["cat_sizes"][node])]

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
        tree = Tree(**{name: self.arrays[name][lo:hi].copy() for name in NODE_ARRAYS})
        cat = self.cat_arrays
        if cat is not None and np.any(cat["split_type"][lo:hi] == 1):
            sizes = cat["cat_sizes"][lo:hi].copy()
            starts = cat["cat_segments"][lo:hi]
            segments = np.zeros(hi - lo, np.int64)
            segments[1:] = np.cumsum(sizes)[:-1]
            nodes = np.flatnonzero(sizes)
            values = [cat["cat_values"][starts[j] : starts[j] + sizes[j]] for j in nodes.tolist()]
            tree.split_type = cat["split_type"][lo:hi].copy()
            tree.cat_segments = np.where(sizes > 0, segments, 0).astype(np.int64)
            tree.cat_sizes = sizes
            tree.cat_values = np.concatenate(values).astype(np.int32) if values else np.zeros(0, np.int32)
        return tree

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
            and self.has_categorical == other.has_categorical
            and all(
                np.array_equal(t.node_categories(i), u.node_categories(i))
                for t, u in self._cat_pairs(other)
                for i in range(t.n_nodes)
            )
        )

    def _cat_pairs(self, other: "Ensemble"):
        """(tree, tree) pairs of the trees of self and other with categorical splits."""
        if not self.has_categorical:
            return []
        return [(self.tree(i), other.tree(i)) for i in range(self.n_trees)]

    def __getstate__(self):
        self._flush()
        return self.__dict__.copy()

    def __setstate__(self, state):
        # a pickle made before categorical splits has neither attribute: a numeric model
        self.__dict__.update({"cat_arrays": None, "_cat_kernel": None, **state})
