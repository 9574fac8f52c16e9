"""``python -m tracer.cli``: the same as the ``hoptrace`` command."""

from tracer.cli import main

main(prog_name="hoptrace")
