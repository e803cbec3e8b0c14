"""Many traces: the partitioned dataset, incremental ingest, SQL views, per-rank analysis, Dask."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import TRACES, needs_shared

from tracekit import dataset, engine
from tracekit.analyze.per_trace import trace_metrics
from tracekit.cli import main
from tracekit.ingest import load

HTA = TRACES / "hta"
PAIR = HTA / "trace_filter"  # ranks 0 and 1 of one 128-rank job


@pytest.fixture(scope="module")
def hta_dataset(tmp_path_factory) -> Path:
    if not HTA.exists():
        pytest.skip(f"{HTA} absent (../shared not beside the checkout)")
    out = tmp_path_factory.mktemp("ds") / "hta"
    assert main(["ingest", str(HTA), "-o", str(out)]) == 0
    return out


@needs_shared
def test_every_hta_trace_lands_in_its_own_partition_with_rank(hta_dataset):
    entries = dataset.read_index(hta_dataset)
    files = dataset.find_traces([HTA])
    assert len(entries) == len(files) == 20
    for e in entries:
        part = hta_dataset / e.partition
        assert part.exists() and f"rank={e.rank}" in e.partition and f"trace={e.trace_id}" in e.partition
        assert load(part).num_rows == e.rows
    ranks = {Path(e.source_file).name: e.rank for e in entries}
    assert ranks["sampled_rank-0.json.gz"] == 0 and ranks["sampled_rank-1.json.gz"] == 1
    assert ranks["rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"] == 34  # from distributedInfo
    assert ranks["control.json.gz"] == 3


@needs_shared
def test_ingest_is_incremental_by_content(hta_dataset, tmp_path, capsys):
    hta_dataset = Path(shutil.copytree(hta_dataset, tmp_path / "copy"))  # the module's dataset stays as it was
    before = (hta_dataset / dataset.INDEX_NAME).read_text()
    assert main(["ingest", str(HTA), "-o", str(hta_dataset)]) == 0
    assert "0 added, 20 already in" in capsys.readouterr().out
    assert (hta_dataset / dataset.INDEX_NAME).read_text() == before
    # A renamed copy is the same content: skipped; changed bytes are a new trace.
    copy = tmp_path / "renamed.json.gz"
    shutil.copy(PAIR / "sampled_rank-0.json.gz", copy)
    changed = tmp_path / "changed_rank7.json.gz"
    changed.write_bytes(gzip.compress(gzip.decompress((PAIR / "sampled_rank-0.json.gz").read_bytes()) + b"\n"))
    assert main(["ingest", str(copy), str(changed), "-o", str(hta_dataset), "--run", "extra"]) == 0
    out = capsys.readouterr().out
    assert "1 added, 1 already in" in out
    added = dataset.read_index(hta_dataset)[-1]
    assert added.run == "extra" and added.rank == 0  # distributedInfo wins over the file name


@needs_shared
def test_the_same_bytes_twice_in_one_call_are_ingested_once(tmp_path):
    # Under two names and two run labels (directories): one entry, one partition, both names mapped to it.
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        shutil.copy(PAIR / "sampled_rank-0.json.gz", tmp_path / d / "trace.json.gz")
    out = tmp_path / "ds"
    result = dataset.ingest([tmp_path / "a", tmp_path / "b"], out)
    assert len(result.added) == 1 and result.skipped == [str(tmp_path / "b" / "trace.json.gz")] and not result.errors
    entry = result.added[0]
    assert entry.run == "a" and result.by_file[str(tmp_path / "b" / "trace.json.gz")] == entry
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == [entry.partition]
    assert [e.partition for e in dataset.read_index(out)] == [entry.partition]
    assert [p.name for p in out.glob("source=*/run=*")] == ["run=a"]  # the duplicate's folders are gone too


@needs_shared
def test_a_file_read_with_its_known_hash_is_the_same_table(tmp_path):
    # Ingest hands the Kineto reader the hash it dedupes by, so the reader need not hash the file again.
    plain = tmp_path / "rank-0.json"
    plain.write_bytes(gzip.decompress((PAIR / "sampled_rank-0.json.gz").read_bytes()))
    for path in (PAIR / "sampled_rank-0.json.gz", plain):
        table = load(path, file_sha256=dataset.sha256_of(path))
        assert table.equals(load(path), check_metadata=True)


@needs_shared
def test_per_rank_results_equal_single_file_results(hta_dataset):
    traces = dataset.per_trace_metrics(hta_dataset)
    assert len(traces) == 20
    for row in traces.to_dict(orient="records"):
        single = trace_metrics(load(row["source_file"]))
        assert {k: row[k] for k in single} == single, row["source_file"]
    pair = traces[traces.source_file.str.contains("trace_filter")].set_index("rank")
    for rank in (0, 1):
        single = trace_metrics(load(PAIR / f"sampled_rank-{rank}.json.gz"))
        assert pair.loc[rank, "step_time"] == single["step_time"]
        assert pair.loc[rank, "kernel_count"] == single["kernel_count"]


@needs_shared
def test_dataset_report_names_the_slowest_rank(hta_dataset, tmp_path):
    pair_ds = tmp_path / "pair"
    assert main(["ingest", str(PAIR), "-o", str(pair_ds)]) == 0
    out = tmp_path / "r.json"
    assert main(["report", str(pair_ds), "--by", "rank", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    steps = {t["rank"]: t["step_time"] for t in data["traces"]}
    worst = max(steps, key=steps.get)
    md = tmp_path / "r.md"
    assert main(["report", str(pair_ds), "-o", str(md)]) == 0
    assert f"Slowest rank: {worst} with a mean step time of {steps[worst] / 1e6:,.3f} ms" in md.read_text()


@needs_shared
def test_sql_views_agree_with_the_tables(hta_dataset, capsys):
    pytest.importorskip("duckdb")
    from tracekit.sql import VIEWS, query

    cols, rows = query(hta_dataset, "SELECT count(*) FROM traces")
    assert rows == [(20,)]
    _, rows = query(hta_dataset, "SELECT rank, count(*) FROM kernels WHERE trace IN "
                                 "(SELECT trace_id FROM traces WHERE source_file LIKE '%trace_filter%') "
                                 "GROUP BY rank ORDER BY rank")
    for rank, kernels in rows:
        assert kernels == trace_metrics(load(PAIR / f"sampled_rank-{rank}.json.gz"))["kernel_count"]
    _, rows = query(hta_dataset, "SELECT sum(rows) FROM traces")
    _, events = query(hta_dataset, "SELECT count(*) FROM events")
    assert rows == events
    for view in VIEWS:
        query(hta_dataset, f"SELECT * FROM {view} LIMIT 1")
    assert main(["sql", str(hta_dataset), "SELECT count(*) AS n FROM steps", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n"] > 0
    assert main(["sql", str(hta_dataset), "SELEC 1"]) == 2
    assert "SQL error" in capsys.readouterr().err


@needs_shared
def test_bad_file_in_a_batch_is_reported_and_the_rest_ingested(tmp_path, capsys):
    bad = tmp_path / "in" / "broken.json"
    bad.parent.mkdir()
    bad.write_text('{"traceEvents": [')
    shutil.copy(PAIR / "sampled_rank-1.json.gz", bad.parent / "good.json.gz")
    out = tmp_path / "ds"
    assert main(["ingest", str(bad.parent), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tracekit: error: {bad}: ")
    assert [Path(e.source_file).name for e in dataset.read_index(out)] == ["good.json.gz"]
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]  # no temp files left


def test_sql_on_a_non_dataset_is_an_input_error(tmp_path, capsys):
    pytest.importorskip("duckdb")
    assert main(["sql", str(tmp_path), "SELECT 1"]) == 1
    assert "not a tracekit dataset" in capsys.readouterr().err


@needs_shared
def test_dask_local_cluster_gives_the_same_dataset_and_results(hta_dataset, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    out = tmp_path / "dask"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert len(cluster.workers) == 2
        assert main(["ingest", str(PAIR), str(HTA / "trace_compare"), "-o", str(out), "--engine", "dask",
                     "--scheduler", cluster.scheduler_address]) == 0
    local = tmp_path / "local"
    assert main(["ingest", str(PAIR), str(HTA / "trace_compare"), "-o", str(local)]) == 0
    strip = [{k: v for k, v in e.as_dict().items()} for e in dataset.read_index(out)]
    assert strip == [e.as_dict() for e in dataset.read_index(local)]
    for e in dataset.read_index(out):
        assert load(out / e.partition).equals(load(local / e.partition))
    on_dask = dataset.per_trace_metrics(out, engine="dask")  # a LocalCluster of its own
    single = dataset.per_trace_metrics(local)
    assert on_dask.drop(columns="source_file").equals(single.drop(columns="source_file"))


def _worker_setup() -> dict:
    import os
    import sys

    import dask
    return {"trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"), "profile": dask.config.get("distributed.worker.profile.enabled"),
            "preloaded": sorted(m for m in engine.WORKER_PRELOAD if m in sys.modules)}


def test_tracekit_starts_its_dask_workers_without_the_malloc_trim_setting_and_with_the_reader_imported(monkeypatch):
    """The settings that made a Kineto ingest task 22% slower inside a Dask worker than outside
    (benchmarks/dask_ingest.py; engine.local_cluster says why)."""
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)  # a worker inherits this process's own
    with engine.local_cluster(1) as cluster, distributed.Client(cluster) as client:
        (setup,) = client.run(_worker_setup).values()
    assert setup == {"trim": None, "profile": False, "preloaded": sorted(engine.WORKER_PRELOAD)}


@needs_shared
def test_a_damaged_partition_is_named_in_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["ingest", str(PAIR), "-o", str(out)]) == 0
    part = out / dataset.read_index(out)[0].partition
    part.write_bytes(part.read_bytes()[:1000])
    capsys.readouterr()
    commands = [["report", str(out)]]
    if __import__("importlib").util.find_spec("duckdb"):
        commands.append(["sql", str(out), "SELECT count(*) FROM events"])
    for argv in commands:
        assert main(argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"tracekit: error: {part}: "), err


def test_overhead_with_a_damaged_manifest_is_an_input_error(tmp_path, capsys):
    (tmp_path / "manifest.jsonl").write_text('{"run_id": "x", "status": "ok"}\n{"run_id": \n')
    assert main(["overhead", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tracekit: error: {tmp_path / 'manifest.jsonl'}: line 2 is not JSON (Expecting value)"]
