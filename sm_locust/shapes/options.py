"""Options of the load shapes (shown in the web UI whatever shape is picked)."""

from __future__ import annotations

from sm_locust.options import OptionSpec

OPTIONS: list[OptionSpec] = [
    OptionSpec("--start-users", "SM_LOCUST_START_USERS", 1, "step shape: users in the first step", int),
    OptionSpec("--step-users", "SM_LOCUST_STEP_USERS", 1, "step shape: users added each step", int),
    OptionSpec("--step-seconds", "SM_LOCUST_STEP_SECONDS", 30.0, "step shape: seconds each step is held", float),
    OptionSpec("--max-users", "SM_LOCUST_MAX_USERS", 10, "step shape: users in the last step", int),
]
