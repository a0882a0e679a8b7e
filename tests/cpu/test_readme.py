"""Every example of README.md runs as written.

The ```python blocks run in order in one namespace (as a reader pasting them into one session
would) in a temporary working directory. Of the shell commands, only the ``dgboost ...`` command
lines run (through the installed ``dgboost`` entry point's click group, in the same directory):

- the two installation lines of the first ```bash block are not run (``python3.12 -m venv`` and
  ``pip install`` would create an environment and install packages, which a unit test must not
  do); the ``dgboost demo`` that ends the first line is run on its own;
- the ```bash block of the Development section runs GPU and benchmark tools, not ``dgboost``
  commands, so none of it runs here;
- ``dgboost explain --model model.json --data rows.csv --output shap.csv`` in the prose reads a
  rows.csv that the README does not create: the test writes one from the example's ``X``
  (first 200 rows) before running it.
"""
import os
import re
import shlex
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def _dgboost_commands(text: str) -> list[list[str]]:
    """``dgboost ...`` command lines: segments of ```bash lines and `inline code` with options."""
    commands = []
    for block in _blocks(text, "bash"):
        for line in block.splitlines():
            line = line.split("#", 1)[0]
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("dgboost "):
                    commands.append(shlex.split(part))
    for inline in re.findall(r"`(dgboost [^`]*--[^`]*)`", text):
        commands.append(shlex.split(inline))
    return commands


def test_readme_has_the_examples_this_test_runs():
    text = README.read_text(encoding="utf-8")
    assert len(_blocks(text, "python")) >= 3
    assert [c[:2] for c in _dgboost_commands(text)] == [["dgboost", "demo"], ["dgboost", "explain"]]


def test_readme_examples_run(tmp_path, monkeypatch):
    from dgboost.cli import main

    text = README.read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    started = time.perf_counter()
    for i, block in enumerate(_blocks(text, "python")):
        exec(compile(block, f"README.md python block {i}", "exec"), namespace)
    assert (tmp_path / "model.json").is_file()
    assert namespace["contribs"].shape == (20_000, 29)
    assert len(namespace["models"]) == 2

    # the README does not create rows.csv for `dgboost explain`: write it from the example's X
    pd.DataFrame(namespace["X"][:200], columns=[f"f{j}" for j in range(namespace["X"].shape[1])]) \
        .to_csv(tmp_path / "rows.csv", index=False)
    runner = CliRunner()
    for command in _dgboost_commands(text):
        result = runner.invoke(main, command[1:], catch_exceptions=False)
        assert result.exit_code == 0, f"{' '.join(command)}:\n{result.output}"
    shap = pd.read_csv(tmp_path / "shap.csv")
    assert len(shap) == 200
    # the CLI's SHAP values are the Python API's
    explainer = namespace["dg"].TreeExplainer(namespace["booster"])
    np.testing.assert_allclose(shap.to_numpy()[:, :28], explainer.shap_values(namespace["X"][:200]),
                               rtol=1e-4, atol=1e-5)
    print(f"README examples ran in {time.perf_counter() - started:.1f} s")
