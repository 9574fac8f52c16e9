"""The ``hoptrace`` command line.

One module per command group (``analysis``: analyze, whatif, compare, report, check;
``runs``; ``collect``; ``bench``; ``demo``: demo and serve; ``top``), the options and output
dispatch they share in ``_common``. Imports run one way: this module imports the command
modules, they import ``_common``, and nothing imports this module back.

Every user mistake is one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

from typing import Any

import click

from tracer._errors import HoptraceError
from tracer._terminal import printable
from tracer.cli import analysis, bench, collect, demo, runs, top

__all__ = ["main"]


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HoptraceError as exc:
            click.echo(f"hoptrace: error: {printable(exc)}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo("hoptrace: interrupted", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hoptrace")
def main() -> None:
    """hoptrace: where every millisecond of a request to an AI model goes.

    Trace a chain (client, gateway, auth, context, inference, postprocess, return),
    attribute each trace's time along its critical path, and see what a faster model
    would really buy.

    \b
    Examples:
      hoptrace demo                                   # the traced demo chain, run twice
      hoptrace runs                                   # the runs in the default store
      hoptrace analyze --run '*:baseline'             # where one run's time goes
      hoptrace whatif --stage inference --speedup 10  # what a 10x faster model buys
      hoptrace report -o report.html                  # one page: shares, waterfalls
      hoptrace collect                                # receive your services' spans
      hoptrace analyze http://localhost:16686 --service gateway   # traces in Jaeger

    'hoptrace COMMAND --help' tells each command's options.
    """


for _module in (analysis, runs, collect, bench, demo, top):
    for _command in _module.COMMANDS:
        main.add_command(_command)
