"""The links between a model's output space and its margins (the base score <-> base margin).

A leaf module: the objectives (:mod:`dgboost.objective`) and the model readers and writers
(:mod:`dgboost._model_schema`) both use it, without either importing the other.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ParameterError

__all__ = ["LOGISTIC", "LOG_LINK", "margin_from_score", "score_from_margin"]

#: Objectives whose predictions are sigmoid(margin).
LOGISTIC = ("reg:logistic", "binary:logistic")
#: Objectives whose predictions are exp(margin).
LOG_LINK = ("count:poisson", "reg:gamma", "reg:tweedie", "survival:cox")


def margin_from_score(objective_name: str, score: float) -> float:
    """Output space -> margin: logit for logistic objectives, log for the log-link ones
    (Poisson, gamma, Tweedie, Cox), else identity.

    Parameters
    ----------
    objective_name : str
        The objective's name, e.g. ``"binary:logistic"``.
    score : float
        A value in the objective's output space (a base score).

    Returns
    -------
    float
        The margin.

    Raises
    ------
    ParameterError
        For a score outside the link's domain: (0, 1) for logistic, > 0 for log links.
    """
    score = float(score)
    if objective_name in LOGISTIC:
        if not 0.0 < score < 1.0:
            raise ParameterError(f"base_score={score} must be in (0, 1) for {objective_name}")
        return math.log(score) - math.log1p(-score)
    if objective_name in LOG_LINK:
        if score <= 0.0:
            raise ParameterError(f"base_score={score} must be > 0 for {objective_name}")
        return math.log(score)
    return score


def score_from_margin(objective_name: str, margin: float) -> float:
    """Margin -> output space (the inverse of :func:`margin_from_score`).

    Parameters
    ----------
    objective_name : str
        The objective's name.
    margin : float
        A margin.

    Returns
    -------
    float
        The value in the objective's output space.
    """
    margin = float(margin)
    if objective_name in LOGISTIC:
        # the overflow-free logistic function, in float64 as the objectives compute it
        return float(0.5 * (1.0 + np.tanh(0.5 * np.asarray(margin, dtype=np.float64))))
    if objective_name in LOG_LINK:
        return math.exp(margin)
    return margin
