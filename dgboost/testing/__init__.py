"""Test helpers shipped with dgboost (reference implementations and check_* helpers).

The ``check_*`` helpers take a ``device`` argument so that CPU and GPU tests run the same
checks (docs/design.md §7 "Tests and oracles"); see :mod:`dgboost.testing.checks`.
"""

__all__ = [
    "check_same_trees_as_cpu",
    "check_training_is_deterministic",
    "check_prediction_matches_reference",
    "check_matches_cpu_metric",
    "check_raises_like_cpu",
    "assert_same_trees",
    "normalised_model_json",
    "round_significant",
    "LEAF_VALUE_RTOL",
]


def __getattr__(name):
    # imported on first use: the backends import dgboost.testing.reference, and the checks
    # import the training loop, which imports the backends
    if name in __all__:
        from . import checks

        return getattr(checks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
