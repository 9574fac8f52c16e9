"""The compiled OTLP JSON-lines decoder, built where a C compiler is (else left out:
the Python decoder does the same work, slower). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracer.spans._native",
            ["tracer/spans/_native.c"],
            optional=True,  # no compiler: install without it
            extra_compile_args=["-O2"],
        )
    ]
)
