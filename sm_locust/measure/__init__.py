"""The measurement core: per-second timeline samples, steady-state step windows, the load
generator's loop lag, and the 95 % intervals every figure carries. Pure code that the
searches, sweeps, reports and gates read."""
