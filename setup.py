"""Only here to declare the C extensions; everything else is in pyproject.toml.

The extensions are optional: without a C compiler the build skips them and tracekit reads Kineto
JSON with its pure-Python scanner (``tracekit/_native/pure.py``), nsys SQLite through Python's
sqlite3 module and XSpace events through protobuf's objects: slower, the same tables.
"""

from setuptools import Extension, setup

HEADERS = ["tracekit/_native/buffers.h", "tracekit/_native/json_text.h"]


def native(name: str, **options: list[str]) -> Extension:
    """tracekit._native._<name>, built from tracekit/_native/<name>.c when a compiler is there."""
    flags = options.pop("extra_compile_args", [])
    return Extension(f"tracekit._native._{name}", sources=[f"tracekit/_native/{name}.c"], depends=HEADERS,
                     extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wno-unused-function", *flags],
                     optional=True, **options)


setup(
    ext_modules=[
        native("kineto_scan", extra_compile_args=["-pthread"], extra_link_args=["-pthread"]),
        # The nsys reader's row walker; SQLite is resolved at run time (dlopen), so no sqlite3.h.
        native("sqlite_columns", libraries=["dl"]),
        native("xplane_events"),
        # The exclusive-by-priority sweep every report's host and GPU split runs on.
        native("interval_sweep"),
    ]
)
