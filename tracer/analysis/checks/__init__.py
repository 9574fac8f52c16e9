"""Checks of an analysis against a limit or another: the budget, the SLO, the cost and
the comparison of two runs."""
