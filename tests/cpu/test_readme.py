"""Every example of README.md runs as written, and the README and docs/ stay an entry point.

The ```python blocks run in order in one namespace (as a reader pasting them into one session
would) in a temporary working directory. Of the shell commands, only the ``dgboost ...`` command
lines run (through the installed ``dgboost`` entry point's click group, in the same directory):

- the installation lines (``python3.12 -m venv``, ``pip install``) are not run: they would
  create an environment and install packages, which a unit test must not do; the ``dgboost
  demo`` that ends the first line is run on its own;
- ``dgboost predict`` and ``dgboost explain`` read a rows.csv that the README does not create:
  the test writes one from the example's ``X`` (first 200 rows) before running them.

The other tests hold the README to its job: at most 12 KB, the set-up commands first, no commit
hashes, every relative link of README.md and docs/*.md resolving, docs/benchmarks.md what
benchmarks/make_table.py writes, and docs/parameters.md naming every training parameter.
"""

import dataclasses
import importlib.util
import re
import shlex
import time
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_BYTES = 12 * 1024


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


def _relative_links(text: str) -> list[str]:
    """Targets of Markdown links and images that are not URLs or anchors of the same page."""
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, blanks to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {_anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def _make_table():
    spec = importlib.util.spec_from_file_location("_make_table", ROOT / "benchmarks" / "make_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_has_the_examples_this_test_runs():
    text = README.read_text(encoding="utf-8")
    assert len(_blocks(text, "python")) >= 4
    assert [c[:2] for c in _dgboost_commands(text)] == [
        ["dgboost", "demo"],
        ["dgboost", "predict"],
        ["dgboost", "explain"],
    ]


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

    # the README does not create rows.csv for the shell commands: write it from the example's X
    X = namespace["X"][:200]
    pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])]).to_csv(tmp_path / "rows.csv", index=False)
    runner = CliRunner()
    for command in _dgboost_commands(text):
        result = runner.invoke(main, command[1:], catch_exceptions=False)
        assert result.exit_code == 0, f"{' '.join(command)}:\n{result.output}"
    dg, booster = namespace["dg"], namespace["booster"]
    # the CLI's predictions and SHAP values are the Python API's
    preds = pd.read_csv(tmp_path / "preds.csv").to_numpy().ravel()
    np.testing.assert_allclose(preds, booster.predict(dg.DMatrix(X)), rtol=1e-6, atol=1e-7)
    shap = pd.read_csv(tmp_path / "shap.csv")
    assert len(shap) == 200
    np.testing.assert_allclose(shap.to_numpy()[:, :28], dg.TreeExplainer(booster).shap_values(X), rtol=1e-4, atol=1e-5)
    print(f"README examples ran in {time.perf_counter() - started:.1f} s")


def test_the_readme_is_at_most_12_kib():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes; move detail into docs/"


def test_the_readme_starts_with_the_two_set_up_commands():
    text = README.read_text(encoding="utf-8")
    first = re.search(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    assert first is not None and text[: first.start()].count("\n") <= 3
    lines = first.group(1).splitlines()
    assert len(lines) == 2
    assert "pip install -e ." in lines[0] and lines[0].endswith("dgboost demo")
    assert 'pip install -e ".[test]"' in lines[1] and "pytest" in lines[1]


def test_the_readme_names_no_commit_hashes():
    text = README.read_text(encoding="utf-8")
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    assert hashes == []


def test_every_relative_link_of_the_readme_and_docs_resolves():
    pages = [README] + sorted(DOCS.glob("*.md"))
    assert len(pages) > 5
    broken = []
    for page in pages:
        for target in _relative_links(page.read_text(encoding="utf-8")):
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n[a](missing.md) [b](page.md#top) [c](page.md#nowhere) [d](https://x.org/y)\n")
    links = _relative_links(page.read_text())
    assert links == ["missing.md", "page.md#top", "page.md#nowhere"]
    assert _anchors(page) == {"top"}
    assert _anchor("5. Distributed design (Dask)") == "5-distributed-design-dask"


def test_docs_benchmarks_is_what_make_table_writes_from_the_results():
    make_table = _make_table()
    assert (ROOT / make_table.PAGE).read_text(encoding="utf-8") == make_table.render(ROOT), (
        "docs/benchmarks.md is stale: run python benchmarks/make_table.py --write"
    )


def test_every_table_of_docs_benchmarks_links_its_results_file():
    text = (ROOT / _make_table().PAGE).read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    tables = [s for s in sections if "|---" in s]
    assert len(tables) >= 4
    for section in tables:
        assert "](../benchmarks/results/" in section, section.splitlines()[0]
    summary = [line for line in sections[0].splitlines() if line.startswith("| ") and "|---" not in line][1:]
    assert summary and all(
        re.search(r"\| \[[^]]+\.json\]\(\.\./benchmarks/results/[^)]+\) \|$", row) for row in summary
    )


def test_docs_parameters_names_every_training_parameter():
    from dgboost.params import TrainParams

    text = (DOCS / "parameters.md").read_text(encoding="utf-8")
    names = [
        "lambda" if f.name == "reg_lambda" else f.name
        for f in dataclasses.fields(TrainParams)
        if not f.name.startswith("_")
    ]
    missing = [name for name in names if f"`{name}`" not in text]
    assert missing == []
