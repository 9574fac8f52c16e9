"""The what-if: a trace retimed for a change (:mod:`.retime`), the change as a value
(:mod:`.scenario`), the model an answer is given with (:mod:`.answer`), the what-if
under load (:mod:`.loadrun`, :mod:`.loadgraph`, :mod:`.overload`, :mod:`.loadmodel`,
:mod:`.simulate`, :mod:`.capacity`) and the exemplar waterfall."""
