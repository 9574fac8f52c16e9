"""Sampled traffic: a trace's weight, the weighted estimates and their intervals, the
weighted group figures and the mergeable sketch."""
