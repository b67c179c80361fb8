"""Student's t quantile at 0.975: the one table the 95 % intervals of repeated runs and of run
comparisons read (a table to 30 degrees of freedom, then the Cornish-Fisher expansion)."""

from __future__ import annotations

Z975 = 1.959964
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(dof: int) -> float:
    """The 97.5th percentile of Student's t with `dof` degrees of freedom (within 0.001 past the table)."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {dof}")
    if dof <= len(T975):
        return T975[dof - 1]
    z = Z975
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)
