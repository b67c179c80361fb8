"""Print the paths of the shipped locustfiles."""

from sm_locust.locustfiles import HERE

for p in sorted(HERE.glob("*.py")):
    if not p.name.startswith("_"):
        print(p)
