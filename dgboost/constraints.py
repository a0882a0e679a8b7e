"""Interaction constraints: which features a node may split on, given the features above it.

XGBoost's rule (``interaction_constraints``, a list of feature groups): the root may split on
any feature; a node whose ancestors split on the features P may split on P itself and on every
group that contains all of P. A feature in no group can still split the root, and then only
itself below it. The grower turns the allowed set of each node into a column of its feature
mask, so both backends and both growth policies apply it without knowing it exists.
"""
from __future__ import annotations

import json

import numpy as np

from .errors import ParameterError

__all__ = ["InteractionConstraints", "parse_interaction_constraints"]


def parse_interaction_constraints(value) -> tuple | None:
    """``interaction_constraints`` as XGBoost accepts it: a list of lists of feature indices
    or names, or that list as a JSON string; returned as a tuple of tuples (None: unset)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value.replace("'", '"'))
        except json.JSONDecodeError:
            raise ParameterError(f"interaction_constraints={value!r} is not a list of feature lists, "
                                 "e.g. [[0, 1], [2, 3, 4]]") from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in value):
        raise ParameterError(f"interaction_constraints must be a list of feature lists, e.g. [[0, 1], [2, 3]]; "
                             f"got {value!r}")
    groups = []
    for g in value:
        for f in g:
            if isinstance(f, bool) or not isinstance(f, (int, np.integer, str)):
                raise ParameterError(f"interaction_constraints: {f!r} is neither a feature index nor a name")
        groups.append(tuple(f if isinstance(f, str) else int(f) for f in g))
    return tuple(groups)


class InteractionConstraints:
    """The constraint groups of one training job, resolved to feature indices.

    Parameters
    ----------
    groups : tuple of tuple of int or str
        From :func:`parse_interaction_constraints`.
    n_features : int
    feature_names : list of str or None
        Resolves groups given by name.
    """

    def __init__(self, groups, n_features: int, feature_names=None):
        index = {str(n): i for i, n in enumerate(feature_names or [])}
        self.n_features = int(n_features)
        self.groups: list[frozenset] = []
        for g in groups:
            ids = set()
            for f in g:
                if isinstance(f, str):
                    if f not in index:
                        raise ParameterError(f"interaction_constraints names feature {f!r}, which the data "
                                             f"does not have (features: {list(index)[:8]}...)")
                    ids.add(index[f])
                elif not 0 <= f < self.n_features:
                    raise ParameterError(f"interaction_constraints: feature index {f} is out of range "
                                         f"for {self.n_features} features")
                else:
                    ids.add(f)
            self.groups.append(frozenset(ids))
        self._cache: dict[frozenset, np.ndarray] = {}

    def allowed(self, path: frozenset) -> np.ndarray:
        """bool (n_features,): the features a node under splits on ``path`` may split on."""
        found = self._cache.get(path)
        if found is None:
            found = np.zeros(self.n_features, dtype=bool)
            if not path:
                found[:] = True
            else:
                found[list(path)] = True
                for g in self.groups:
                    if path <= g:
                        found[list(g)] = True
            self._cache[path] = found
        return found
