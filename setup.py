"""Only here to declare the C extension; everything else is in pyproject.toml.

The extensions are optional: without a C compiler the build skips them and tracekit reads Kineto
JSON with its pure-Python scanner (``tracekit/_native/pure.py``) and nsys SQLite through Python's
sqlite3 module, slower but giving the same tables.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracekit._native._kineto_scan",
            sources=["tracekit/_native/kineto_scan.c"],
            depends=["tracekit/_native/buffers.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-function", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        ),
        # The nsys reader's row walker; SQLite is resolved at run time (dlopen), so no sqlite3.h.
        Extension(
            "tracekit._native._sqlite_columns",
            sources=["tracekit/_native/sqlite_columns.c"],
            depends=["tracekit/_native/buffers.h", "tracekit/_native/json_text.h"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-function"],
            libraries=["dl"],
            optional=True,
        ),
        # The XSpace reader's event walker.
        Extension(
            "tracekit._native._xplane_events",
            sources=["tracekit/_native/xplane_events.c"],
            depends=["tracekit/_native/buffers.h", "tracekit/_native/json_text.h"],
            extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wno-unused-function"],
            optional=True,
        ),
    ]
)
