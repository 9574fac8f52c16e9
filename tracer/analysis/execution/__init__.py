"""How the analyzer runs, apart from what it computes: files and the store streamed in
bounded memory (:mod:`.stream`, :mod:`.lines`, :mod:`.bigfile`) on every core
(:mod:`.parallel`) or as Dask tasks (:mod:`.dask_engine`), and the entry point that
picks among them (:mod:`.pipeline`). What each trace yields is computed in
:mod:`tracer.analysis.attribution`. ``docs/scaling.md`` describes the design."""
