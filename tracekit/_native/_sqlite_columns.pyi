"""Type stub of the C extension built from sqlite_columns.c (see that file for what each returns)."""

from typing import Any

def load(path: str) -> None: ...
def read(uri: str, sql: str, n_int: int, n_obj: int, keys: list[bytes], lookups: list[Any],
         rows_hint: int) -> tuple[list[bytearray], list[list[Any]], tuple[bytearray, bytearray, bytearray], int]: ...
