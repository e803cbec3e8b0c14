"""Only here to declare the C extension; everything else is in pyproject.toml.

The extension is optional: without a C compiler the build skips it and tracekit reads Kineto JSON
with its pure-Python scanner (``tracekit/_native/pure.py``), slower but giving the same tables.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracekit._native._kineto_scan",
            sources=["tracekit/_native/kineto_scan.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-function", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        )
    ]
)
