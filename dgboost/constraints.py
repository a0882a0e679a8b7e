"""Training constraints: interaction constraints and monotone constraints.

Interaction constraints decide which features a node may split on, given the features above it.
XGBoost's rule (``interaction_constraints``, a list of feature groups): the root may split on
any feature; a node whose ancestors split on the features P may split on P itself and on every
group that contains all of P. A feature in no group can still split the root, and then only
itself below it. The grower turns the allowed set of each node into a column of its feature
mask, so both backends and both growth policies apply it without knowing it exists.

Monotone constraints (``monotone_constraints``, one of -1, 0, 1 per feature) make the model's
output non-decreasing (1) or non-increasing (-1) in a feature. As XGBoost ``hist`` does it:
each node carries bounds [lower, upper] on its weight (the root: unbounded); a candidate
split's child weights are their Newton weights clipped into the node's bounds, a split on a
constrained feature whose clipped weights go the wrong way is refused, and with any
constraint every gain (the node's own too) is computed from the clipped weights. When a node
splits on a constrained feature its children's bounds meet at the mean of the two clipped
weights; a split on an unconstrained feature passes the node's bounds to both children. Leaf
values are clipped into their node's bounds. Here only the parsing and the resolution to one
sign per feature live; the split evaluation of each backend applies the rule
(``Backend.evaluate_splits`` and ``Backend.child_bounds``).
"""

from __future__ import annotations

import json
import numbers

import numpy as np

from .errors import ParameterError

__all__ = [
    "InteractionConstraints",
    "parse_interaction_constraints",
    "parse_monotone_constraints",
    "resolve_monotone_constraints",
    "monotone_constraints_text",
]


def parse_interaction_constraints(value) -> tuple | None:
    """``interaction_constraints`` as XGBoost accepts it: a list of lists of feature indices
    or names, or that list as a JSON string; returned as a tuple of tuples (None: unset)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value.replace("'", '"'))
        except json.JSONDecodeError:
            raise ParameterError(
                f"interaction_constraints={value!r} is not a list of feature lists, e.g. [[0, 1], [2, 3, 4]]"
            ) from None
    if not isinstance(value, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in value):
        raise ParameterError(
            f"interaction_constraints must be a list of feature lists, e.g. [[0, 1], [2, 3]]; got {value!r}"
        )
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
                        raise ParameterError(
                            f"interaction_constraints names feature {f!r}, which the data "
                            f"does not have (features: {list(index)[:8]}...)"
                        )
                    ids.add(index[f])
                elif not 0 <= f < self.n_features:
                    raise ParameterError(
                        f"interaction_constraints: feature index {f} is out of range for {self.n_features} features"
                    )
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


# -- monotone constraints ------------------------------------------------------------------
_MONOTONE_EXAMPLE = "e.g. (1, 0, -1), the string '(1,0,-1)' or {'age': 1} with feature names"


def _monotone_sign(value, where: str) -> int:
    """One constraint value as an int in {-1, 0, 1}, or a ParameterError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(
            f"monotone_constraints: {where} is {value!r}, not an integer -1, 0 or 1 ({_MONOTONE_EXAMPLE})"
        )
    if int(value) not in (-1, 0, 1):
        raise ParameterError(
            f"monotone_constraints: {where} is {int(value)}; each constraint must be "
            "-1 (decreasing), 0 (none) or 1 (increasing)"
        )
    return int(value)


def _monotone_from_text(text: str) -> tuple:
    """XGBoost's text form ``"(1,0,-1)"`` (``"[1,0,-1]"`` too) as a tuple of ints."""
    body = text.strip()
    if len(body) < 2 or (body[0], body[-1]) not in (("(", ")"), ("[", "]")):
        raise ParameterError(
            f"monotone_constraints={text!r} is not a parenthesised list of -1/0/1 values ({_MONOTONE_EXAMPLE})"
        )
    items = [v.strip() for v in body[1:-1].split(",")]
    if items and not items[-1]:
        items.pop()  # "(1,)": Python's one-element tuple, as XGBoost writes it
    values = []
    for k, item in enumerate(items):
        try:
            values.append(int(item))
        except ValueError:
            raise ParameterError(
                f"monotone_constraints={text!r}: item {k} ({item!r}) is not an integer -1, 0 or 1"
            ) from None
    return tuple(values)


def parse_monotone_constraints(value) -> tuple | dict | None:
    """``monotone_constraints`` in any form XGBoost accepts, checked without the data.

    Parameters
    ----------
    value : sequence of int, str, dict, or None
        One of -1, 0, 1 per feature as a tuple, list or integer array; XGBoost's text form
        ``"(1,0,-1)"``; or ``{feature_name: sign}`` (resolved against the training data's
        feature names by :func:`resolve_monotone_constraints`).

    Returns
    -------
    tuple of int, dict of str to int, or None
        None when unset (None, ``""``, ``"()"`` or an empty sequence).

    Raises
    ------
    ParameterError
        For text that is not a parenthesised list of integers, values other than -1, 0
        and 1, dict keys that are not strings, or any other type.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        value = _monotone_from_text(value)
    if isinstance(value, dict):
        out = {}
        for name, sign in value.items():
            if not isinstance(name, str):
                raise ParameterError(f"monotone_constraints: dict keys must be feature names (strings), got {name!r}")
            out[name] = _monotone_sign(sign, f"feature {name!r}")
        return out or None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ParameterError(
            f"monotone_constraints must be a sequence of -1/0/1 per feature "
            f"({_MONOTONE_EXAMPLE}), got {type(value).__name__}"
        )
    signs = tuple(_monotone_sign(v, f"item {k}") for k, v in enumerate(value))
    return signs or None


def _monotone_signs(spec, n_features: int, feature_names) -> np.ndarray:
    """int8 (n_features,) signs of a parsed tuple or dict (see resolve_monotone_constraints)."""
    signs = np.zeros(int(n_features), np.int8)
    if isinstance(spec, dict):
        index = {str(n): i for i, n in enumerate(feature_names or [])}
        unknown = [name for name in spec if name not in index]
        if unknown:
            have = f"the data's features are {list(index)[:8]}..." if index else "the data has no feature names"
            raise ParameterError(
                f"monotone_constraints names {unknown[:5]}, which are not training data "
                f"feature names ({have}): constrained features must be a subset of them"
            )
        for name, sign in spec.items():
            signs[index[name]] = sign
        return signs
    if len(spec) > n_features:
        raise ParameterError(
            f"monotone_constraints has {len(spec)} values but the data has {n_features} "
            "features: the size of monotone constraint should be less or equal to the "
            "number of features"
        )
    signs[: len(spec)] = spec
    return signs


def resolve_monotone_constraints(spec, n_features: int, feature_names=None) -> np.ndarray | None:
    """The sign of every feature, from :func:`parse_monotone_constraints`'s result.

    Parameters
    ----------
    spec : tuple of int, dict of str to int, or None
    n_features : int
        Columns of the training data.
    feature_names : list of str or None
        Resolves a dict given by name.

    Returns
    -------
    ndarray of int8 (n_features,) or None
        None when no feature is constrained (all zeros: training is then exactly the
        unconstrained one, as in XGBoost). A shorter sequence is padded with zeros, as
        XGBoost pads it.

    Raises
    ------
    ParameterError
        For more values than features (XGBoost's check) or names the data does not have.
    """
    if spec is None:
        return None
    signs = _monotone_signs(spec, n_features, feature_names)
    return signs if signs.any() else None


def monotone_constraints_text(spec, n_features: int, feature_names=None) -> str:
    """XGBoost's text of the parameter (``save_config``'s ``tree_train_param``): ``"(1,0,-1)"``,
    ``"()"`` when unset; a dict is written as the per-feature tuple, as XGBoost writes it."""
    spec = parse_monotone_constraints(spec)
    if spec is None:
        return "()"
    if isinstance(spec, dict):
        try:
            spec = tuple(_monotone_signs(spec, n_features, feature_names).tolist())
        except ParameterError:  # names this model's data did not have: nothing to write
            return "()"
    if len(spec) == 1:
        return f"({spec[0]},)"
    return "(" + ",".join(str(v) for v in spec) + ")"
