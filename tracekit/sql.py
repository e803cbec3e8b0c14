"""SQL over a tracekit dataset with DuckDB: documented views over the partitioned Parquet.

Views (every one has the hive columns ``source``, ``run``, ``rank`` and ``trace`` beside the
event columns of schemas/events.md):

- ``events``   every event of every trace;
- ``kernels``  GPU kernels (kind ``gpu_kernel``);
- ``launches`` host calls that launch GPU work (runtime/driver APIs classified ``launch``);
- ``ranges``   NVTX / record_function / TraceMe ranges (kinds ``user_range``, ``gpu_user_range``);
- ``steps``    step markers (ProfilerStep#N, TraceMe steps, NVTX step#N);
- ``traces``   one row per trace, from the dataset index: trace_id, sha256, source, run, rank,
               source_file, partition, rows, ingested_at.

DuckDB reads only the columns and partitions a query touches, so a dataset larger than memory
can be queried (filter on ``run``/``rank``/``trace`` to prune partitions).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tracekit.analyze.classify import API_RULES
from tracekit.dataset import INDEX_NAME, is_dataset
from tracekit.errors import InputError, UsageError

VIEWS = ("events", "kernels", "launches", "ranges", "steps", "traces")


def connect(directory: str | Path) -> Any:
    """A DuckDB connection with the dataset's views defined."""
    try:
        import duckdb
    except ImportError:
        raise UsageError("tracekit sql needs DuckDB: pip install 'tracekit[sql]'") from None
    d = Path(directory)
    if not is_dataset(d):
        raise InputError(d, f"not a tracekit dataset (no {INDEX_NAME}); create one with tracekit ingest ... -o {d}/")
    try:
        return _views(duckdb.connect(), d)
    except duckdb.Error as e:
        raise _error(e) from None


def _error(e: Exception) -> Exception:
    """A damaged partition or index is bad input, naming the file; anything else is the query's fault."""
    import duckdb

    first = str(e).splitlines()[0]
    damaged = re.search(r"""['"]([^'"*]+\.(?:parquet|jsonl))['"]""", str(e))
    if damaged and not isinstance(e, duckdb.ParserException):
        return InputError(damaged.group(1), f"cannot be read ({first.replace(damaged.group(0), 'it')})")
    return UsageError(f"SQL error: {first}")


def _views(con: Any, d: Path) -> Any:
    files = (d / "**" / "part-0.parquet").as_posix().replace("'", "''")
    index = (d / INDEX_NAME).as_posix().replace("'", "''")
    launch = dict(API_RULES)["launch"].replace("'", "''")
    if any(d.rglob("part-0.parquet")):
        con.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{files}', hive_partitioning = true, "
                    f"union_by_name = true)")
    else:  # an empty dataset: the views exist and are empty
        con.execute("CREATE VIEW events AS SELECT NULL::VARCHAR AS kind, NULL::VARCHAR AS name WHERE false")
    con.execute("CREATE VIEW kernels AS SELECT * FROM events WHERE kind = 'gpu_kernel'")
    con.execute(f"CREATE VIEW launches AS SELECT * FROM events WHERE kind IN ('runtime_api', 'driver_api') "
                f"AND regexp_matches(name, '{launch}')")
    con.execute("CREATE VIEW ranges AS SELECT * FROM events WHERE kind IN ('user_range', 'gpu_user_range')")
    con.execute("CREATE VIEW steps AS SELECT * FROM events WHERE kind = 'step'")
    # ingested_at as text: DuckDB would hand Python a tz-aware timestamp, which needs pytz.
    con.execute(f"CREATE VIEW traces AS SELECT * REPLACE (CAST(ingested_at AS VARCHAR) AS ingested_at) "
                f"FROM read_json('{index}', format = 'newline_delimited')")
    return con


def query(directory: str | Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``sql`` over the dataset; returns column names and rows. SQL errors are usage errors."""
    import duckdb

    con = connect(directory)
    try:
        cursor = con.execute(sql)
    except duckdb.Error as e:
        raise _error(e) from None
    columns = [c[0] for c in cursor.description or []]
    return columns, cursor.fetchall()
