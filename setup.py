"""The compiled parts, built where a C compiler is (else left out: Python does the same
work, slower): the OTLP JSON-lines decoder, and the analysis's per-trace steps (the
streaming window, the batches' shape key and machine words, the split value's span).
Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracer.spans._native",
            ["tracer/spans/_native.c"],
            optional=True,  # no compiler: install without it
            extra_compile_args=["-O2"],
        ),
        Extension(
            "tracer.analysis.attribution._native",
            ["tracer/analysis/attribution/_native.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
