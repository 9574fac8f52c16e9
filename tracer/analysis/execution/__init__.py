"""How the analyzer runs, apart from what it computes: one trace attributed into a
row (:mod:`.attribute`), traces of one shape a batch at a time (:mod:`.batches`,
:mod:`.walks`), files and the store streamed in bounded memory (:mod:`.stream`,
:mod:`.lines`, :mod:`.bigfile`) on every core (:mod:`.parallel`) or as Dask tasks
(:mod:`.dask_engine`), and the entry point that picks among them
(:mod:`.pipeline`). ``docs/scaling.md`` describes the design."""
