"""``dgboost explain --cluster`` from Parquet to Parquet at growing row counts: rows/s and the
peak host and device memory of every worker, to show that explaining streams.

Synthetic rows (``--files`` files of ``--rows-per-file`` rows x 28 float32 features, 10%
missing, written once in parallel) are explained by one command per row count,

    python -m dgboost.cli explain --cluster CONFIG --model M --data 'folder/part-0*.parquet' --output OUT

run as a subprocess, exactly as a user runs it. Its processes are sampled every 0.2 s: the
resident memory (RSS) of the command and of each worker process (its children), and, with
``nvidia-smi``, the device memory each process holds (the driver's view: what the process has
allocated, CuPy's pool cache included). Reported per row count: rows/s over the whole
command (cluster start included) and over the explaining alone (from the command's
"explaining ..." line to its "wrote ..." line), the peaks, the output's row count, and a
check that output files are bitwise the single-process explainer's values of their rows on
the same device (every file up to 10M rows, the first and last beyond).

The model: binary, depth 8, 100 rounds, trained on 1M rows of the same distribution on the
device the cluster explains on (the shape of the scaling benchmark's model).

    python benchmarks/explain_parquet.py --config local-cuda --counts 10,100      # 10M and 100M rows
    python benchmarks/explain_parquet.py --config local-cpu --counts 1,20 --rows-per-file 2000 --rounds 10
    python benchmarks/explain_parquet.py --config local-cuda --counts 400    # 400M rows on every GPU
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import versions, write_result  # noqa: E402

FEATURES = 28
NAMES = [f"f{i}" for i in range(FEATURES)]


def _write_file(args) -> None:
    path, rows, seed = args
    import pandas as pd

    from dgboost.datasets import make_synthetic

    X, _, _ = make_synthetic(rows, FEATURES, task="binary", missing_rate=0.1, seed=seed)
    tmp = f"{path}.tmp"
    pd.DataFrame(X, columns=NAMES).to_parquet(tmp, index=False)
    os.replace(tmp, path)


def make_files(folder: Path, files: int, rows_per_file: int) -> float:
    """``part-000.parquet`` ... (float32 features only); files already there are kept."""
    folder.mkdir(parents=True, exist_ok=True)
    todo = [
        (str(folder / f"part-{i:03d}.parquet"), rows_per_file, 1000 + i)
        for i in range(files)
        if not (folder / f"part-{i:03d}.parquet").exists()
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(_write_file, todo))
    return time.perf_counter() - started


def train_model(path: Path, device: str, rounds: int, rows: int) -> None:
    import dgboost as dg
    from dgboost.datasets import make_synthetic

    X, y, _ = make_synthetic(rows, FEATURES, task="binary", missing_rate=0.1, seed=0)
    params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.1, "max_bin": 256, "device": device}
    dg.train(params, dg.DMatrix(X, y, feature_names=NAMES), rounds).save_model(str(path))


class _Sampler:
    """Peak RSS of a process and of each of its descendants, and the device memory per process."""

    def __init__(self, pid: int, period: float = 0.2):
        import psutil

        self.root = psutil.Process(pid)
        self.period = period
        self.rss: dict[int, int] = {}
        self.gpu: dict[int, int] = {}
        self.gpu_total_mib = 0
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._has_smi = shutil.which("nvidia-smi") is not None

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    if p.pid not in self.names:
                        self.names[p.pid] = " ".join(p.cmdline()[:3])[:80]
                except psutil.Error:
                    continue
                self.rss[p.pid] = max(self.rss.get(p.pid, 0), rss)
            if self._has_smi:
                self._sample_gpu()
            self._stop.wait(self.period)

    def _sample_gpu(self) -> None:
        try:
            apps = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=5,
            )
            total = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=5,
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        for line in apps.stdout.strip().splitlines():
            pid, mib = (s.strip() for s in line.split(","))
            if pid.isdigit() and mib.isdigit():
                self.gpu[int(pid)] = max(self.gpu.get(int(pid), 0), int(mib))
        used = [int(s) for s in total.stdout.split() if s.isdigit()]
        if used:
            self.gpu_total_mib = max(self.gpu_total_mib, sum(used))


def file_pattern(count: int) -> str:
    """A glob (without ``.parquet``) of exactly the first ``count`` files ``part-000`` ... (every
    name has 3 digits): 1, 10-90 in tens, 100-1000 in hundreds."""
    if count == 1:
        return "part-000"
    if count % 10 == 0 and 10 <= count < 100:
        k = count // 10
        return "part-00*" if k == 1 else f"part-0[0-{k - 1}]*"
    if count % 100 == 0 and 100 <= count <= 1000:
        k = count // 100
        return "part-0*" if k == 1 else ("part-*" if k == 10 else f"part-[0-{k - 1}]*")
    raise SystemExit(
        f"--counts: {count} files cannot be picked by one glob; give 1, 10-90 in tens or 100-1000 in hundreds"
    )


def explain_once(config: str, model: Path, data_glob: str, output: Path) -> dict:
    """One ``dgboost explain --cluster`` command, sampled; its timings, peaks and output."""
    shutil.rmtree(output, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "dgboost.cli",
        "explain",
        "--cluster",
        config,
        "--model",
        str(model),
        "--data",
        data_glob,
        "--output",
        str(output),
    ]
    lines: list[tuple[float, str]] = []
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with _Sampler(proc.pid) as sampler:
        for line in proc.stderr:
            lines.append((time.perf_counter() - started, line.rstrip()))
            print(f"    [{lines[-1][0]:7.1f} s] {line.rstrip()}", flush=True)
        rc = proc.wait()
    wall = time.perf_counter() - started
    if rc != 0:
        raise SystemExit(f"explain failed (exit {rc})")
    begin = next(t for t, l in lines if l.startswith("explaining "))
    end = next(t for t, l in lines if l.startswith("wrote "))
    workers = {pid: rss for pid, rss in sampler.rss.items() if pid != proc.pid}
    return {
        "wall_s": wall,
        "explain_s": end - begin,
        "exit": rc,
        "peak_rss_command_bytes": sampler.rss.get(proc.pid, 0),
        "peak_rss_per_process_bytes": {sampler.names.get(p, str(p)) + f" [{p}]": r for p, r in workers.items()},
        "peak_rss_largest_worker_bytes": max(workers.values(), default=0),
        # the worker's own device memory (the total below also counts this process's)
        "peak_device_mib_largest_worker": sampler.gpu.get(max(workers, key=workers.get), 0) if workers else 0,
        "peak_device_mib_per_process": {str(p): m for p, m in sampler.gpu.items()},
        "peak_device_mib_total": sampler.gpu_total_mib,
    }


def output_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in sorted(folder.glob("part.*.parquet")))


def parts_are_bitwise(model: Path, data_files: list[Path], output: Path, device: str, which) -> bool:
    """Output files ``which`` (indices) are bitwise the single-process explainer's values of
    their rows: the same rows of the input files in order (Dask may split or join files into
    partitions, so rows are matched by offset, from the Parquet footers)."""
    import pandas as pd
    import pyarrow.parquet as pq

    import dgboost as dg

    explainer = dg.TreeExplainer(str(model), device=device, progress=False)
    parts = sorted(output.glob("part.*.parquet"))
    part_ends = np.cumsum([pq.ParquetFile(p).metadata.num_rows for p in parts])
    file_ends = np.cumsum([pq.ParquetFile(p).metadata.num_rows for p in data_files])
    for k in which:
        got = pd.read_parquet(parts[k])
        start = int(part_ends[k]) - len(got)
        first = int(np.searchsorted(file_ends, start, side="right"))
        last = int(np.searchsorted(file_ends, part_ends[k] - 1, side="right"))
        rows = pd.concat([pd.read_parquet(data_files[f]) for f in range(first, last + 1)], ignore_index=True)
        offset = start - (int(file_ends[first - 1]) if first else 0)
        expected = explainer.shap_frame(rows.iloc[offset : offset + len(got)])
        if list(got.columns) != list(expected.columns) or not bool(
            (got.to_numpy().view(np.uint64) == expected.to_numpy().view(np.uint64)).all()
        ):
            return False
    return True


def table_lines(results: list[dict]) -> list[dict]:
    """The benchmark table's lines (docs/benchmarks.md): peak memory at the largest row count
    over that at the smallest (1.00 = it does not grow with the rows), with the rates."""
    if len(results) < 2:
        return []
    small, large = results[0], results[-1]
    lines = []
    for what, key in (
        ("host RSS of the largest worker", "peak_rss_largest_worker_bytes"),
        ("device memory of the worker", "peak_device_mib_largest_worker"),
    ):
        unit = (lambda v: f"{v / 2**30:.2f} GiB") if key.endswith("bytes") else (lambda v: f"{v:,} MiB")
        lines.append(
            {
                "what": f"dgboost explain --cluster, Parquet to Parquet: peak {what} at {large['rows']:,} rows / "
                f"at {small['rows']:,} rows",
                "ratio": large[key] / max(small[key], 1),
                "note": f"1.00 = does not grow with the rows; {unit(large[key])} vs {unit(small[key])}; "
                f"{large['rows_per_s_explaining']:,.0f} vs {small['rows_per_s_explaining']:,.0f} rows/s "
                f"explaining ({large['wall_s']:.0f} s vs {small['wall_s']:.0f} s for the whole command); "
                f"one run each",
            }
        )
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="local-cuda", help="cluster config (name or YAML)")
    parser.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        help="run on a copy of the config with this many threads per worker",
    )
    parser.add_argument("--counts", default="10,100", help="numbers of files to explain, one command each")
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--train-rows", type=int, default=1_000_000)
    parser.add_argument("--folder", default="/tmp/dgboost-explain-parquet")
    parser.add_argument("--output", default=None, help="result JSON (default benchmarks/results/explain_parquet.json)")
    args = parser.parse_args(argv)

    from dgboost.cli import resolve_device

    counts = [int(c) for c in args.counts.split(",")]
    for count in counts:
        file_pattern(count)  # refuse a count no glob can pick before any file is written
    folder = Path(args.folder)
    data = folder / "rows"
    gen_s = make_files(data, max(counts), args.rows_per_file)
    print(f"{max(counts)} files of {args.rows_per_file:,} rows in {data} ({gen_s:.1f} s to write)", flush=True)
    device = resolve_device("auto") if "cuda" in args.config else "cpu"
    config = args.config
    if args.threads_per_worker is not None:
        import yaml

        from dgboost.cluster import load_config

        copy = load_config(config)
        copy.setdefault("args", {})["threads_per_worker"] = args.threads_per_worker
        config = str(folder / f"cluster-{args.threads_per_worker}-threads.yaml")
        Path(config).write_text(yaml.safe_dump(copy))
    model = folder / "model.json"
    train_model(model, device, args.rounds, args.train_rows)
    results = []
    payload = {
        "config": args.config,
        "threads_per_worker": args.threads_per_worker,
        "device": device,
        "rows_per_file": args.rows_per_file,
        "features": FEATURES,
        "model": {"depth": 8, "rounds": args.rounds, "objective": "binary:logistic"},
        "versions": versions("dgboost", "cupy", "dask", "distributed", "pyarrow"),
        "results": results,
    }
    for count in counts:
        n = count * args.rows_per_file
        pattern = file_pattern(count)
        out = folder / f"shap-{count}"
        print(f"explaining {n:,} rows ({count} files)", flush=True)
        res = explain_once(config, model, str(data / f"{pattern}.parquet"), out)
        res.update(
            rows=n,
            files=count,
            rows_written=output_rows(out),
            rows_per_s_command=n / res["wall_s"],
            rows_per_s_explaining=n / res["explain_s"],
            partitions_written=len(list(out.glob("part.*.parquet"))),
        )
        # every partition up to 10 files; the first and the last beyond (explaining 100M rows
        # again in this process would double the run)
        which = range(res["partitions_written"]) if count <= 10 else (0, res["partitions_written"] - 1)
        res["checked_partitions"] = list(which)
        res["checked_partitions_bitwise_single_process"] = parts_are_bitwise(
            model, sorted(data.glob("part-*.parquet"))[:count], out, device, which
        )
        results.append(res)
        shutil.rmtree(out, ignore_errors=True)  # disk: 100M rows of float64 values are 23 GB
        payload["table"] = table_lines(results)
        write_result("explain_parquet", payload, args.output)
    print(
        "\n| rows | files | command s | explaining s | rows/s (explaining) | peak RSS worker | "
        "peak RSS command | peak device MiB | rows written | partitions | checked partitions bitwise |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        dev = r["peak_device_mib_largest_worker"]
        print(
            f"| {r['rows']:,} | {r['files']} | {r['wall_s']:.1f} | {r['explain_s']:.1f} | "
            f"{r['rows_per_s_explaining']:,.0f} | {r['peak_rss_largest_worker_bytes'] / 2**30:.2f} GiB | "
            f"{r['peak_rss_command_bytes'] / 2**30:.2f} GiB | {dev:,} | {r['rows_written']:,} | "
            f"{r['partitions_written']} | {len(r['checked_partitions'])}: "
            f"{r['checked_partitions_bitwise_single_process']} |"
        )


if __name__ == "__main__":
    main()
