"""Training gives its set-up's cached memory back once, before its first round."""

import dgboost as dg
from dgboost import _training_job
from dgboost.backend.cpu import CPUBackend
from dgboost.datasets import make_synthetic


def test_training_releases_cached_memory_once_after_its_set_up_and_before_its_rounds(monkeypatch):
    events = []
    prepare, run_round = _training_job.TrainingJob._prepare_data, _training_job.TrainingJob.run_round

    def prepared(self, *args, **kwargs):
        prepare(self, *args, **kwargs)
        events.append("set-up")

    def round_run(self, r, *args, **kwargs):
        events.append("round")
        return run_round(self, r, *args, **kwargs)

    monkeypatch.setattr(_training_job.TrainingJob, "_prepare_data", prepared)
    monkeypatch.setattr(_training_job.TrainingJob, "run_round", round_run)
    monkeypatch.setattr(CPUBackend, "release_cached_memory", lambda self: events.append("release"))
    X, y, _ = make_synthetic(300, 5, task="binary", seed=0)
    dg.train({"objective": "binary:logistic", "max_depth": 3}, dg.DMatrix(X, y), 3, verbose_eval=False)
    assert events == ["set-up", "release", "round", "round", "round"]
