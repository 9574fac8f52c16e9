"""Coverage-guided fuzzing of hoptrace's compiled parts, with a differential oracle.

Each input is some OTLP JSON lines (split at newlines; several lines, so that a later
line meets the templates an earlier one made). The decoder's state is reset before
each input, so that any finding reproduces from its input alone. For each line:

- the compiled decoder (``tracer/spans/_native.c``) gives what the typed decoder gives
  (the same trace ids in the same order, the same spans with values of the same types),
  or steps aside (None); it never takes a line the typed decoder refuses;
- ``traces_from_otlp_line``, the analyzer's whole path, returns or steps aside and
  raises nothing;
- for every trace decoded, the compiled shape words and split holder
  (``tracer/analysis/attribution/_native.c``) equal their Python references
  (``words.shape_words``, ``words.earliest_holder``), or decline (NotImplemented).

A mismatch raises, and atheris reports it as a finding with the input that made it; a
sanitizer report (AddressSanitizer, UBSan) ends the run the same way. Run through
``fuzz/run``, which builds the sanitized extensions first (docs/security.md).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["tracer.spans"]):
    from tracer.spans import _otlp_lines
    from tracer.spans._otlp_lines import traces_from_otlp_line, typed_traces

from tracer.analysis.attribution import words as _words  # noqa: E402

_native = _otlp_lines._native_decode
_compiled_words = _words._compiled_words
_compiled_earliest = _words._compiled_earliest
#: Attribute keys a split value is read from, and one that no span has.
_SPLIT_KEYS = ("gen_ai.usage.input_tokens", "hoptrace.stage", "k", "absent")


def _reset() -> None:
    _otlp_lines._SEEN_ATTRIBUTES.clear()
    _otlp_lines._SERVICES.clear()
    _otlp_lines._compiled()  # configured afresh: no templates


def _check_words(spans: list) -> None:
    got = _compiled_words(spans)
    if got is not NotImplemented:
        want = _words.shape_words(spans)
        if got != want:
            raise AssertionError(f"compiled words differ: {got!r} != {want!r}")
    for key in _SPLIT_KEYS:
        held = _compiled_earliest(spans, key)
        if held is not NotImplemented and held is not _words.earliest_holder(spans, key):
            raise AssertionError(f"compiled split holder differs for {key!r}")


def check(data: bytes) -> None:
    """The oracle on one input (the module docstring)."""
    _reset()
    for line in data.split(b"\n")[:8]:
        compiled = _native(line)
        typed = typed_traces(line)
        if compiled is not None:
            if typed is None:
                raise AssertionError("the compiled decoder took a line the typed one refuses")
            if list(compiled) != list(typed) or repr(compiled) != repr(typed):
                raise AssertionError(f"decoders differ:\n{compiled!r}\n{typed!r}")
        found = traces_from_otlp_line(line)
        for spans in (found or {}).values():
            _check_words(list(spans))


def main() -> None:
    if _native is None or _compiled_words is None:
        sys.exit("fuzz/decoder.py: the compiled parts are not built (run it through fuzz/run)")
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
