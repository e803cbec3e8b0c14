"""tracekit sql DATASET "SELECT ...": DuckDB over a dataset's views (events, kernels, launches, ranges,
steps, traces)."""

from __future__ import annotations

import argparse
import csv
import json
import sys


class SqlCommand:
    name = "sql"
    help = "run SQL (DuckDB) over a dataset: views events, kernels, launches, ranges, steps, traces"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("dataset", metavar="DATASET", help="a dataset directory (tracekit ingest ... -o DATASET/)")
        parser.add_argument("query", metavar="SQL", help="e.g. \"SELECT rank, count(*) FROM kernels GROUP BY rank\"")
        parser.add_argument("-f", "--format", choices=("terminal", "csv", "json"), default="terminal")

    def run(self, args: argparse.Namespace) -> int:
        from tracekit.sql import query

        columns, rows = query(args.dataset, args.query)
        if args.format == "csv":
            writer = csv.writer(sys.stdout)
            writer.writerow(columns)
            writer.writerows(rows)
        elif args.format == "json":
            sys.stdout.write(json.dumps([dict(zip(columns, r, strict=True)) for r in rows], default=str) + "\n")
        else:
            from rich.table import Table
            from rich.text import Text

            from tracekit.render.terminal_report import data_console

            table = Table(*columns, box=None)
            for r in rows:
                table.add_row(*[Text(str(v)) for v in r])  # Text: kernel names are full of [brackets]
            data_console(width=200 if not sys.stdout.isatty() else None).print(table)
        return 0
