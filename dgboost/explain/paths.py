"""Path table: every root-to-leaf path of an ensemble as a flat, GPU-shaped list of elements.

TreeSHAP only needs, for every leaf, the splits on its root-to-leaf path. Following
GPUTreeShap, the ensemble is flattened into one *path element* per (path, split); a path
is the contiguous run of elements ``path_offsets[p]:path_offsets[p + 1]``.

Element layout (one entry per element in each array, all C-contiguous)::

    path_idx           int32    path the element belongs to (elements of a path are contiguous)
    feature            int32    split feature; -1 for the bias element
    lower, upper       float32  the branch admits  lower <= x < upper  (x cast to float32)
    is_missing_branch  uint8    1 when missing (NaN) values take this branch
    zero_fraction      float64  child cover / parent cover (product over merged splits)
    v                  float64  leaf value of the path (repeated on every element)
    group              int32    output group of the path's tree (repeated on every element)

(``path_idx``, ``v`` and ``group`` are made on demand from the per-path arrays, not stored.)

Per-path arrays: ``path_offsets`` (int64, n_paths + 1), ``path_v`` (float64),
``path_group`` (int32), ``path_tree`` (int32).

Element 0 of every path is the *bias element*: feature -1, interval (-inf, inf),
is_missing_branch 1, zero_fraction 1. The non-bias elements follow in root-to-leaf
order of the first split on each feature; repeated features on a path are merged into one
element (intervals intersected, zero fractions multiplied, missing flags AND-ed), so every
feature appears at most once per path.

An element is *on* for a row ``x`` when ``lower <= x[feature] < upper``, or ``x[feature]``
is NaN and ``is_missing_branch`` is 1. ``x`` is compared as float32, like the model's
thresholds. ``+inf`` inputs are treated as the largest float32 (thresholds are finite).

Categorical splits (models with ``Ensemble.has_categorical``; GPUTreeShap's SplitCondition
with a category bitset) add two arrays, ``None`` for a model without categorical splits (its
table is then exactly what it was before categorical support):

    cat_offset         int64    per element: offset of its category set in ``cat_pool``,
                                -1 for an element without categorical split
    cat_pool           uint32   the category sets, each ``[n_words, outside, word 0, ...]``

A category set admits the value ``x`` when ``0 <= x < 32 * n_words`` and bit ``int(x)``
(bit ``c & 31`` of word ``c >> 5``, ``int`` truncating) is set, and any other non-missing
value (negative, too large, ``+-inf``) when ``outside`` is 1: the row then goes where
XGBoost's ``common::Decision`` sends an invalid category, left. A right branch's set is the
node's set with ``outside`` 0; a left branch's is its complement over the node's words with
``outside`` 1. Repeated categorical splits of a feature on a path intersect their sets, and
the element is *on* when ``x`` lies in its interval (-inf, inf unless numeric splits on the
same feature narrow it) *and* its category set, or ``x`` is NaN on the missing branch.
A set belongs to a tree node (the child a path enters: the intersection of every categorical
condition on the feature from the root to that child), so paths through one node share it
and the pool grows with the number of nodes, not with paths times categories: a 4,000
category feature costs 127 words per child of a split on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .._layout import PATH_ELEMENT
from .._threads import balanced_runs, host_threads, run_over_runs, run_tasks
from ..errors import ModelFormatError

__all__ = [
    "PathTable",
    "extract_paths",
    "PATH_ELEMENT_DTYPE",
    "as_path_table",
    "element_is_on",
    "element_is_on_cat",
    "category_arrays",
    "flagged_category_arrays",
]

# One path element as a C struct (40 bytes; dgboost._layout.PATH_ELEMENT, mirrored by
# kernels/common.cuh ``PathElement``), for shipping the table to a device in one buffer.
PATH_ELEMENT_DTYPE = PATH_ELEMENT

_ELEMENT_ARRAYS = {
    "feature": np.int32,
    "lower": np.float32,
    "upper": np.float32,
    "is_missing_branch": np.uint8,
    "zero_fraction": np.float64,
}
# per-path values repeated per element (GPUTreeShap's element layout): made on demand from
# the path arrays, never stored (a depth-16 model has 26M elements: 0.4 GB and 0.9 s of copies)
_REPEATED_PATH_ARRAYS = {"path_idx": np.int32, "v": np.float64, "group": np.int32}
_PATH_ARRAYS = {"path_offsets": np.int64, "path_v": np.float64, "path_group": np.int32, "path_tree": np.int32}
# names what extract_paths makes of an ensemble, in a print derived from the model's bytes
# (PathTable._derive_fingerprint): change it with anything that changes the tables made
_LAYOUT = "extract_paths 1"


@dataclass(eq=False)
class PathTable:
    """All root-to-leaf paths of an ensemble (see the module docstring for the layout).

    Attributes
    ----------
    feature : ndarray of int32, shape (n_elements,)
    lower, upper : ndarray of float32, shape (n_elements,)
    is_missing_branch : ndarray of uint8, shape (n_elements,)
    zero_fraction : ndarray of float64, shape (n_elements,)
    path_offsets : ndarray of int64, shape (n_paths + 1,)
    path_v : ndarray of float64, shape (n_paths,)
    path_group, path_tree : ndarray of int32, shape (n_paths,)
    n_groups : int
    base_margin : ndarray of float64, shape (n_groups,)
    n_features : int
        1 + the largest feature index used by any split (0 when no tree splits).
    cat_offset : ndarray of int64, shape (n_elements,), or None
        Offset of each element's category set in ``cat_pool`` (-1: none); None for a model
        without categorical splits.
    cat_pool : ndarray of uint32, shape (pool_words,), or None
        Category sets ``[n_words, outside, words...]`` (module docstring).
    """

    feature: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    is_missing_branch: np.ndarray
    zero_fraction: np.ndarray
    path_offsets: np.ndarray
    path_v: np.ndarray
    path_group: np.ndarray
    path_tree: np.ndarray
    n_groups: int
    base_margin: np.ndarray
    n_features: int
    cat_offset: np.ndarray | None = None
    cat_pool: np.ndarray | None = None

    def __post_init__(self):
        for name, dt in {**_ELEMENT_ARRAYS, **_PATH_ARRAYS}.items():
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=dt))
        if (self.cat_offset is None) != (self.cat_pool is None):
            raise ValueError("cat_offset and cat_pool are given together or not at all")
        if self.cat_offset is not None:
            self.cat_offset = np.ascontiguousarray(self.cat_offset, dtype=np.int64)
            self.cat_pool = np.ascontiguousarray(self.cat_pool, dtype=np.uint32)
        self.base_margin = np.ascontiguousarray(
            np.broadcast_to(np.asarray(self.base_margin, dtype=np.float64), (self.n_groups,))
        )
        self.n_groups = int(self.n_groups)
        self.n_features = int(self.n_features)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_weight_tables", None)  # a cache (see treeshap.shap_values_table)
        return state

    @property
    def fingerprint(self) -> str:
        """SHA-256 content key of every array and size of the table (hex): equal tables,
        equal prints (:func:`~dgboost.explain._digest.content_digest`: a hash tree of 1 MiB
        chunks, hashed by threads side by side; a deep model's table is over 100 MB).

        Computed once and pickled with the table, so a worker that receives the table can find
        what it built for an equal one before (the weight tables) without hashing it again.

        A table that :mod:`dgboost.explain.prepared` extracted from model bytes it keeps takes
        its print from those bytes' content key instead (:meth:`_derive_fingerprint`): the
        same bytes give the same table, and hashing the arrays again cost a first GPU
        explainer 12 to 29 ms (issue 32). Equal prints still mean equal tables; an equal
        table from another source (a dgboost booster, say) has another print, which only
        makes a cache miss.
        """
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = self.__dict__["_fingerprint"] = self._content_print()
        return cached

    def _content_print(self) -> str:
        """The content key of every array and size of the table, hashed afresh (what
        :attr:`fingerprint` keeps unless the print was derived from the model's bytes)."""
        from ._digest import content_digest

        return content_digest(
            (name, value)
            for name, value in sorted(vars(self).items())
            if not name.startswith("_") and value is not None  # None: no categorical splits
        )

    def _derive_fingerprint(self, source_key: tuple) -> None:
        """Make :attr:`fingerprint` the content key of ``source_key`` (the content key of the
        model bytes this table was extracted from, and their kind) and of this module's
        layout (``_LAYOUT``), instead of the arrays' (see :attr:`fingerprint`). For tables
        that :func:`extract_paths` has just made of exactly those bytes' ensemble."""
        from ._digest import content_digest

        self.__dict__["_fingerprint"] = content_digest(
            [("path table of the model", repr(tuple(source_key))), ("layout", _LAYOUT)]
        )

    # -- sizes --------------------------------------------------------------------------
    @property
    def path_idx(self) -> np.ndarray:
        """The path of every element; int32, shape (n_elements,) (made on demand)."""
        return np.repeat(np.arange(self.n_paths, dtype=np.int32), self.path_lengths)

    @property
    def v(self) -> np.ndarray:
        """The leaf value of every element's path; float64, shape (n_elements,) (on demand)."""
        return np.repeat(self.path_v, self.path_lengths)

    @property
    def group(self) -> np.ndarray:
        """The output group of every element's path; int32, shape (n_elements,) (on demand)."""
        return np.repeat(self.path_group, self.path_lengths)

    @property
    def has_categorical(self) -> bool:
        """Whether any element carries a category set (``cat_offset`` is not None)."""
        return self.cat_offset is not None

    def category_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cat_offset, cat_pool)`` for the kernels: the arrays, or for a table without
        categorical splits an empty int64 and a one-word uint32 array (never read)."""
        return category_arrays(self)

    @property
    def n_paths(self) -> int:
        return int(self.path_offsets.shape[0] - 1)

    @property
    def n_elements(self) -> int:
        return int(self.feature.shape[0])

    @property
    def path_lengths(self) -> np.ndarray:
        """Elements per path, bias element included; int64, shape (n_paths,)."""
        return np.diff(self.path_offsets)

    @property
    def max_length(self) -> int:
        return int(self.path_lengths.max()) if self.n_paths else 0

    def expected_value(self) -> np.ndarray:
        """Cover-weighted mean of the trees' outputs per group (base margin not included).

        ``sum over paths of v * prod(zero_fraction)``; float64, shape (n_groups,).
        Computed once per table (an O(elements) pass, most of what a second explainer of
        the same model costs) and kept like :attr:`fingerprint`; each call gets a copy.
        """
        cached = self.__dict__.get("_expected_value")
        if cached is None:
            prod = _path_products(self.zero_fraction, self.path_offsets)
            cached = np.zeros(self.n_groups, dtype=np.float64)
            np.add.at(cached, self.path_group, self.path_v * prod)
            self.__dict__["_expected_value"] = cached
        return cached.copy()

    def to_records(self) -> np.ndarray:
        """Elements as one array of :data:`PATH_ELEMENT_DTYPE` records (padding zeroed;
        the category sets are not part of the records: see ``cat_offset``)."""
        rec = np.zeros(self.n_elements, dtype=PATH_ELEMENT_DTYPE)
        for name in (*_ELEMENT_ARRAYS, *_REPEATED_PATH_ARRAYS):
            rec[name] = getattr(self, name)
        return rec

    def select_paths(self, order: np.ndarray) -> "PathTable":
        """A new table holding paths ``order`` (in that order), renumbered 0..len(order)-1."""
        order = np.asarray(order, dtype=np.int64)
        lengths = self.path_lengths[order]
        offsets = np.zeros(order.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # gather index of every element of the new table
        starts = self.path_offsets[:-1][order]
        idx = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
        return PathTable(
            feature=self.feature[idx],
            lower=self.lower[idx],
            upper=self.upper[idx],
            is_missing_branch=self.is_missing_branch[idx],
            zero_fraction=self.zero_fraction[idx],
            path_offsets=offsets,
            path_v=self.path_v[order],
            path_group=self.path_group[order],
            path_tree=self.path_tree[order],
            n_groups=self.n_groups,
            base_margin=self.base_margin,
            n_features=self.n_features,
            cat_offset=None if self.cat_offset is None else self.cat_offset[idx],
            cat_pool=self.cat_pool,  # offsets stay valid: the pool is shared, not renumbered
        )


_NO_CAT_OFFSET = np.empty(0, dtype=np.int64)
_NO_CAT_POOL = np.zeros(1, dtype=np.uint32)


def category_arrays(table: PathTable) -> tuple[np.ndarray, np.ndarray]:
    """See :meth:`PathTable.category_arrays`."""
    if table.cat_offset is None:
        return _NO_CAT_OFFSET, _NO_CAT_POOL
    return table.cat_offset, table.cat_pool


def flagged_category_arrays(table: PathTable) -> tuple[np.ndarray, np.ndarray]:
    """``(cat_offset, cat_pool)`` as the CUDA kernels read them (kernels/path_element.cuh):
    the pool behind one header word, 1 when the table has category sets (the offsets then
    point one word further), 0 for a table without (its offsets, one -1, are never read).
    The header, not a null pointer, says which: any array type and launcher pass it alike."""
    if table.cat_offset is None:
        return np.full(1, -1, dtype=np.int64), np.zeros(1, dtype=np.uint32)
    offsets = np.where(table.cat_offset >= 0, table.cat_offset + 1, -1)
    return offsets, np.concatenate([np.ones(1, dtype=np.uint32), table.cat_pool])


# ---------------------------------------------------------------------------------------
# extraction (Numba, iterative DFS; no recursion, any depth)
# ---------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _walk_counts(left, right, feature, tree_offsets, n_features, exact):
    """Number of leaves, and of path elements: with ``exact`` those :func:`_walk_fill` writes
    (a bias element, then one per distinct feature on the path), else the bound
    sum(depth + 1) over leaves; raising ValueError on malformed trees."""
    n_trees = tree_offsets.shape[0] - 1
    seen = np.full(max(n_features, 1), -1, dtype=np.int64)  # feature -> path stamp
    n_leaves = 0
    n_elem = 0
    for t in range(n_trees):
        base = tree_offsets[t]
        n = tree_offsets[t + 1] - base
        if n <= 0:
            raise ValueError("tree with no nodes in the ensemble")
        stack = np.empty(n + 1, dtype=np.int64)
        depth = np.empty(n + 1, dtype=np.int64)
        on_path = np.empty(n + 1, dtype=np.int64)
        stack[0] = 0
        depth[0] = 0
        top = 1
        visited = 0
        while top > 0:
            top -= 1
            node = stack[top]
            d = depth[top]
            visited += 1
            if visited > n:
                raise ValueError("tree nodes reachable more than once (cycle or shared child)")
            on_path[d] = node
            lc = left[base + node]
            rc = right[base + node]
            if lc < 0:
                n_elem += 1
                if not exact:
                    n_elem += d
                for a in range(d if exact else 0):
                    f = feature[base + on_path[a]]
                    if seen[f] != n_leaves:
                        seen[f] = n_leaves
                        n_elem += 1
                n_leaves += 1
            else:
                if lc >= n or rc < 0 or rc >= n:
                    raise ValueError("child index out of range in tree")
                if top + 2 > n + 1:
                    raise ValueError("tree nodes reachable more than once (cycle or shared child)")
                stack[top] = rc
                depth[top] = d + 1
                stack[top + 1] = lc
                depth[top + 1] = d + 1
                top += 2
    return n_leaves, n_elem


@njit(cache=True, nogil=True)
def _walk_fill(
    left,
    right,
    feature,
    split_value,
    default_left,
    cover,
    value,
    tree_offsets,
    tree_group,
    n_features,
    max_elem,
    split_type,
    node_cat,
    o_cat,
    o_feature,
    o_lower,
    o_upper,
    o_miss,
    o_zf,
    o_offsets,
    o_pv,
    o_pg,
    o_pt,
):
    """Write every path (bias first, repeated features merged); returns element count.

    With categorical splits (``split_type`` non-empty): a categorical split's branch is the
    interval (-inf, inf) and the element's category set the entering child's
    (``node_cat``, from :func:`_node_category_sets`, which already holds the intersection
    with the feature's earlier sets on the path); ``o_cat`` gets -1 for other elements."""
    has_cat = split_type.shape[0] > 0
    n_trees = tree_offsets.shape[0] - 1
    seen = np.full(max(n_features, 1), -1, dtype=np.int64)  # feature -> path stamp
    slot = np.zeros(max(n_features, 1), dtype=np.int64)  # feature -> element index
    ninf = np.float32(-np.inf)
    pinf = np.float32(np.inf)
    pos = 0
    p = 0
    for t in range(n_trees):
        base = tree_offsets[t]
        n = tree_offsets[t + 1] - base
        stack = np.empty(n + 1, dtype=np.int64)
        depth = np.empty(n + 1, dtype=np.int64)
        on_path = np.empty(n + 1, dtype=np.int64)  # on_path[d] = node at depth d
        stack[0] = 0
        depth[0] = 0
        top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            d = depth[top]
            on_path[d] = node
            lc = left[base + node]
            if lc >= 0:
                stack[top] = right[base + node]
                depth[top] = d + 1
                stack[top + 1] = lc
                depth[top + 1] = d + 1
                top += 2
                continue
            # leaf: emit the path root -> leaf
            o_offsets[p] = pos
            o_pv[p] = value[base + node]
            o_pg[p] = tree_group[t]
            o_pt[p] = t
            o_feature[pos] = -1
            o_lower[pos] = ninf
            o_upper[pos] = pinf
            o_miss[pos] = 1
            o_zf[pos] = 1.0
            if has_cat:
                o_cat[pos] = -1
            pos += 1
            for a in range(d):
                parent = base + on_path[a]
                child = on_path[a + 1]
                f = feature[parent]
                went_left = child == left[parent]
                s = split_value[parent]
                lo = ninf
                hi = pinf
                is_cat = has_cat and split_type[parent] == 1
                if is_cat:
                    pass  # the category set decides, not the threshold
                elif went_left:
                    hi = s
                else:
                    lo = s
                miss = 1 if (default_left[parent] != 0) == went_left else 0
                pc = cover[parent]
                zf = cover[base + child] / pc if pc > 0 else 0.0
                if seen[f] == p:
                    j = slot[f]
                    if lo > o_lower[j]:
                        o_lower[j] = lo
                    if hi < o_upper[j]:
                        o_upper[j] = hi
                    o_miss[j] = o_miss[j] & miss
                    o_zf[j] *= zf
                    if is_cat:
                        o_cat[j] = node_cat[base + child]  # holds the earlier sets' intersection
                else:
                    seen[f] = p
                    slot[f] = pos
                    o_feature[pos] = f
                    o_lower[pos] = lo
                    o_upper[pos] = hi
                    o_miss[pos] = miss
                    o_zf[pos] = zf
                    if has_cat:
                        o_cat[pos] = node_cat[base + child] if is_cat else -1
                    pos += 1
            p += 1
            if pos > max_elem:  # cannot happen: max_elem is an upper bound
                raise ValueError("internal error: path element overflow")
    o_offsets[p] = pos
    return pos


@njit(cache=True, nogil=True)
def _set_word(pool, off, i):
    """Word ``i`` of the category set at ``off``, beyond its words the ``outside`` fill."""
    if i < pool[off]:
        return pool[off + 2 + i]
    return np.uint32(0xFFFFFFFF) if pool[off + 1] != 0 else np.uint32(0)


@njit(cache=True, nogil=True)
def _node_category_sets(left, right, feature, split_type, cat_begin, cat_words, cat_bits, tree_offsets):
    """Per node (ensemble-wide index) the pool offset of the category set a path entering it
    has for its parent's feature, when the parent splits categorically (else -1), and the pool.

    The set of child c of a categorical node P on feature f is P's branch set (P's words for
    the right child, their complement with ``outside`` 1 for the left) intersected with the
    set of the nearest node above P whose parent also split categorically on f (nodes are
    visited parents first, so that set is ready)."""
    n_total = left.shape[0]
    node_cat = np.full(n_total, -1, dtype=np.int64)
    parent = np.full(n_total, -1, dtype=np.int64)
    order = np.empty(n_total, dtype=np.int64)
    is_left = np.zeros(n_total, dtype=np.uint8)
    prev = np.full(n_total, -1, dtype=np.int64)  # node -> the earlier set on the same feature
    size = np.zeros(n_total, dtype=np.int64)  # node -> words of its set
    n_order = 0
    for t in range(tree_offsets.shape[0] - 1):
        base = tree_offsets[t]
        n = tree_offsets[t + 1] - base
        stack = np.empty(n + 1, dtype=np.int64)
        stack[0] = base
        top = 1
        while top > 0:  # parents before children (preorder)
            top -= 1
            node = stack[top]
            order[n_order] = node
            n_order += 1
            if left[node] >= 0:
                for c in (base + right[node], base + left[node]):
                    parent[c] = node
                    stack[top] = c
                    top += 1
                is_left[base + left[node]] = 1
    total = 0
    for i in range(n_order):  # sizes first
        c = order[i]
        pnode = parent[c]
        if pnode < 0 or split_type[pnode] != 1:
            continue
        f = feature[pnode]
        a = pnode
        while parent[a] >= 0:
            pa = parent[a]
            if split_type[pa] == 1 and feature[pa] == f:
                prev[c] = a
                break
            a = pa
        w = np.int64(cat_words[pnode])
        if prev[c] >= 0 and size[prev[c]] > w:
            w = size[prev[c]]
        size[c] = w
        node_cat[c] = total
        total += 2 + w
    pool = np.zeros(max(total, 1), dtype=np.uint32)
    for i in range(n_order):
        c = order[i]
        off = node_cat[c]
        if off < 0:
            continue
        pnode = parent[c]
        go_left = is_left[c] != 0
        w = size[c]
        nw = cat_words[pnode]
        b = cat_begin[pnode]
        pool[off] = np.uint32(w)
        outside = 1 if go_left else 0
        pp = node_cat[prev[c]] if prev[c] >= 0 else -1
        if pp >= 0:
            outside = outside & pool[pp + 1]
        pool[off + 1] = np.uint32(outside)
        for j in range(w):
            if j < nw:
                word = cat_bits[b + j]
            else:
                word = np.uint32(0)
            if go_left:
                word = ~word  # beyond the node's words: outside its set, so left (all ones)
            if pp >= 0:
                word = word & _set_word(pool, pp, j)
            pool[off + 2 + j] = word
    return node_cat, pool


def _ensemble_categories(ensemble):
    """``(split_type, cat_begin, cat_words, cat_bits)`` of an ensemble with categorical splits
    (:meth:`dgboost.tree.Ensemble.categorical_kernel_arrays`: node i's set is
    ``cat_bits[cat_begin[i]:][:cat_words[i]]``, bit c of word c >> 5), else None."""
    arrays = ensemble.categorical_kernel_arrays() if hasattr(ensemble, "categorical_kernel_arrays") else None
    if arrays is None:
        return None
    split_type, cat_begin, cat_words, cat_bits = arrays
    return (
        np.ascontiguousarray(split_type, dtype=np.uint8),
        np.ascontiguousarray(cat_begin, dtype=np.int64),
        np.ascontiguousarray(cat_words, dtype=np.int32),
        np.ascontiguousarray(cat_bits, dtype=np.uint32),
    )


def extract_paths(ensemble) -> PathTable:
    """One path per leaf of every tree of ``ensemble`` (a :class:`dgboost.tree.Ensemble`).

    Paths are emitted tree by tree, leaves left to right. See the module docstring for
    the element layout. Raises ``ValueError`` for malformed trees (child indices out of
    range, cycles) as :class:`~dgboost.errors.ModelFormatError` (a ``ValueError``).
    """
    offsets = np.ascontiguousarray(ensemble.offsets(), dtype=np.int64)
    groups = np.ascontiguousarray(ensemble.groups(), dtype=np.int32)
    left = np.ascontiguousarray(ensemble.left, dtype=np.int32)
    right = np.ascontiguousarray(ensemble.right, dtype=np.int32)
    feature = np.ascontiguousarray(ensemble.feature, dtype=np.int32)
    split_value = np.ascontiguousarray(ensemble.split_value, dtype=np.float32)
    default_left = np.ascontiguousarray(ensemble.default_left, dtype=np.uint8)
    cover = np.ascontiguousarray(ensemble.cover, dtype=np.float64)
    value = np.ascontiguousarray(ensemble.value, dtype=np.float32)

    internal = left >= 0
    if np.any(internal & (feature < 0)):
        raise ModelFormatError("invalid ensemble: an inner node has a negative split feature")
    n_features = int(feature[internal].max()) + 1 if np.any(internal) else 0

    node_arrays = (left, right, feature, split_value, default_left, cover, value)
    cats = _ensemble_categories(ensemble)
    threads = host_threads()
    if cats is None and threads >= _PARALLEL_THREADS and left.shape[0] >= _PARALLEL_NODES and offsets.shape[0] > 2:
        out, pool = _walk_in_chunks(node_arrays, offsets, groups, n_features, threads), None
    else:
        out, pool = _walk(node_arrays, offsets, groups, n_features, cats)
    o_feature, o_lower, o_upper, o_miss, o_zf, o_cat, o_offsets, o_pv, o_pg, o_pt = out
    return PathTable(
        feature=o_feature,
        lower=o_lower,
        upper=o_upper,
        is_missing_branch=o_miss,
        zero_fraction=o_zf,
        path_offsets=o_offsets,
        path_v=o_pv,
        path_group=o_pg,
        path_tree=o_pt,
        n_groups=ensemble.n_groups,
        base_margin=ensemble.base_margin,
        n_features=n_features,
        cat_offset=None if pool is None else o_cat,
        cat_pool=pool,
    )


# trees of at least this many nodes in all are walked by several threads (the walks release
# the GIL); below it a thread pool costs more than it saves. The runs' arrays are joined by
# one more copy of the elements, which two threads barely repay: from four on.
_PARALLEL_NODES = 1 << 16
_PARALLEL_THREADS = 4


def _walk(node_arrays, offsets, groups, n_features, cats=None):
    """The paths of trees ``offsets`` (the ensemble's tree offsets or a run of them: node
    indices stay global) by :func:`_walk_counts` and :func:`_walk_fill`.

    Returns ``(arrays, cat_pool)``: ``arrays`` is ``(feature, lower, upper, missing,
    zero_fraction, cat_offset, path_offsets, path_v, path_group, path_tree)``, the element
    arrays cut to the elements written, ``path_offsets`` from 0, ``path_tree`` counted from
    the first tree given; ``cat_offset`` (empty) and ``cat_pool`` (None) without ``cats``
    (:func:`_ensemble_categories`), whose sets are made once the trees are known sound."""
    left, right, feature = node_arrays[0], node_arrays[1], node_arrays[2]
    try:
        n_paths, n_bound = _walk_counts(left, right, feature, offsets, n_features, False)
    except ValueError as err:  # raised inside Numba with a fixed message
        raise ModelFormatError(f"invalid ensemble: {err}") from None
    if cats is None:
        split_type, node_cat, pool = np.empty(0, np.uint8), np.empty(0, np.int64), None
    else:
        split_type = cats[0]
        node_cat, pool = _node_category_sets(left, right, feature, *cats, offsets)
    o_feature = np.empty(n_bound, np.int32)
    o_lower = np.empty(n_bound, np.float32)
    o_upper = np.empty(n_bound, np.float32)
    o_miss = np.empty(n_bound, np.uint8)
    o_zf = np.empty(n_bound, np.float64)
    o_offsets = np.empty(n_paths + 1, np.int64)
    o_pv = np.empty(n_paths, np.float64)
    o_pg = np.empty(n_paths, np.int32)
    o_pt = np.empty(n_paths, np.int32)
    o_cat = np.empty(0 if pool is None else n_bound, np.int64)
    n_elem = _walk_fill(
        *node_arrays,
        offsets,
        groups,
        n_features,
        n_bound,
        split_type,
        node_cat,
        o_cat,
        o_feature,
        o_lower,
        o_upper,
        o_miss,
        o_zf,
        o_offsets,
        o_pv,
        o_pg,
        o_pt,
    )
    cut = slice(0, n_elem)
    arrays = (
        o_feature[cut],
        o_lower[cut],
        o_upper[cut],
        o_miss[cut],
        o_zf[cut],
        o_cat[:n_elem] if pool is not None else o_cat,
    )
    return arrays + (o_offsets, o_pv, o_pg, o_pt), pool


def _walk_in_chunks(node_arrays, offsets, groups, n_features, threads):
    """:func:`_walk` of all trees (none with categorical splits) by ``threads`` threads,
    each walking runs of whole trees of about equal node counts: the same arrays as one walk
    (a tree's paths depend on that tree alone), and the error of the first bad tree.

    A first pass counts each run's paths and elements exactly, so that each run's walk writes
    its elements straight into the table's arrays at its own offset: per-run arrays joined
    afterwards cost a second copy of every element into fresh pages (a depth-16 model walked
    in 119 ms that way against 108 in place, on an H200's host: issue 32)."""
    left, right, feature = node_arrays[0], node_arrays[1], node_arrays[2]
    cuts = balanced_runs(offsets, 2 * threads)

    def count(t0, t1):
        try:
            return _walk_counts(left, right, feature, offsets[t0 : t1 + 1], n_features, True)
        except ValueError as err:  # raised inside Numba with a fixed message
            raise ModelFormatError(f"invalid ensemble: {err}") from None

    counts = run_over_runs(count, cuts, threads)  # raises the error of the first run that has one
    n_path = np.cumsum([0] + [c[0] for c in counts])
    n_elem = np.cumsum([0] + [c[1] for c in counts])
    total = int(n_elem[-1])
    out = [np.empty(total, dt) for dt in (np.int32, np.float32, np.float32, np.uint8, np.float64)]
    out.append(np.empty(0, np.int64))  # no category sets
    out.append(np.empty(int(n_path[-1]) + 1, np.int64))
    out.extend(np.empty(int(n_path[-1]), dt) for dt in (np.float64, np.int32, np.int32))
    no_cats = np.empty(0, np.uint8), np.empty(0, np.int64), np.empty(0, np.int64)

    def fill(i):  # the walks release the GIL
        t0, t1 = int(cuts[i]), int(cuts[i + 1])
        e = slice(int(n_elem[i]), int(n_elem[i + 1]))
        q = slice(int(n_path[i]), int(n_path[i + 1]))
        local = np.empty(q.stop - q.start + 1, np.int64)  # the run's path offsets from 0
        written = _walk_fill(
            *node_arrays,
            offsets[t0 : t1 + 1],
            groups[t0:t1],
            n_features,
            e.stop - e.start,
            *no_cats,
            *(a[e] for a in out[:5]),
            local,
            out[7][q],
            out[8][q],
            out[9][q],
        )
        if written != e.stop - e.start:  # cannot happen: the counts are exact
            raise RuntimeError("internal error: a run's path elements were miscounted")
        np.add(local[:-1], e.start, out=out[6][q])
        out[9][q] += np.int32(t0)  # the run's trees counted from its first

    run_tasks([lambda i=i: fill(i) for i in range(len(cuts) - 1)], threads)
    out[6][-1] = total
    return tuple(out)


# tables of at least this many elements have their paths' products taken by several threads
_PARALLEL_ELEMENTS = 1 << 20


@njit(cache=True, nogil=True)
def _products(zero_fraction, path_offsets, first, last, out):
    """``out[p]`` = the product of path p's zero fractions, left to right, for p in
    [first, last): ``np.multiply.reduceat``'s operations, so its bits (the last path runs
    to the end of the elements, and an empty path gives its first element, as there)."""
    n_paths = path_offsets.shape[0] - 1
    for p in range(first, last):
        s = path_offsets[p]
        e = path_offsets[p + 1] if p + 1 < n_paths else zero_fraction.shape[0]
        acc = zero_fraction[s]
        for i in range(s + 1, e):
            acc *= zero_fraction[i]
        out[p] = acc


def _path_products(zero_fraction: np.ndarray, path_offsets: np.ndarray) -> np.ndarray:
    """The product of every path's zero fractions; float64, shape (n_paths,): the bits of
    ``np.multiply.reduceat(zero_fraction, path_offsets[:-1])``, by threads over runs of paths
    for a large table (a depth-16 model's 18.7M elements took that reduceat 44 ms on an
    H200's host, the largest part of the explainer's expected value: issue 32)."""
    n_paths = path_offsets.shape[0] - 1
    out = np.empty(max(n_paths, 0), dtype=np.float64)
    threads = host_threads()
    if threads < _PARALLEL_THREADS or zero_fraction.shape[0] < _PARALLEL_ELEMENTS:
        _products(zero_fraction, path_offsets, 0, n_paths, out)
        return out
    cuts = balanced_runs(path_offsets, threads)  # runs of paths of about equal elements
    run_over_runs(lambda a, b: _products(zero_fraction, path_offsets, a, b, out), cuts, threads)
    return out


def as_path_table(model) -> PathTable:
    """``model`` if it already is a :class:`PathTable`, else :func:`extract_paths` of it."""
    if isinstance(model, PathTable):
        return model
    if hasattr(model, "table") and isinstance(model.table, PathTable):
        return model.table  # a PackedTable
    return extract_paths(model)


@njit(cache=True, nogil=True, inline="always")
def element_is_on(x, lower, upper, on_missing):
    """The one rule of an element being "on" for a value: ``lower <= x < upper``, or ``x`` is
    missing (NaN) and the element lies on the missing branch."""
    return ((x >= lower) & (x < upper)) | ((x != x) & on_missing)


@njit(cache=True, nogil=True, inline="always")
def _in_category_set(x, pool, off):
    """Whether the non-missing value ``x`` lies in the category set at ``pool[off]``: bit
    ``int(x)`` when ``0 <= x < 32 * n_words`` (XGBoost's Decision: truncated to an integer),
    else the set's ``outside`` flag (an invalid or unseen category goes left)."""
    nw = pool[off]
    if x >= 0 and x < np.float32(32.0) * np.float32(nw):
        c = np.int64(x)
        return ((pool[off + 2 + (c >> 5)] >> np.uint32(c & 31)) & np.uint32(1)) != 0
    return pool[off + 1] != 0


@njit(cache=True, nogil=True, inline="always")
def element_is_on_cat(x, lower, upper, on_missing, cat_off, pool):
    """:func:`element_is_on` for an element that may carry a category set (``cat_off`` >= 0:
    its offset in ``pool``): also the set must admit ``x`` (module docstring)."""
    if cat_off < 0:
        return element_is_on(x, lower, upper, on_missing)
    if x != x:
        return on_missing
    return (x >= lower) & (x < upper) & _in_category_set(x, pool, cat_off)
