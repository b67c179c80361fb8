"""Leaf helpers every layer may use, that know nothing of SageMaker or Locust.

    numbers.py     the one rule for a number a user gives (finite, whole, in range)
    formatting.py  the one formatter of figures (numbers, percentages, latencies, money, durations)
    registry.py    name -> implementation, aliases, helpful unknown-name errors
    outputs.py     output places checked before anything starts; folders locked while written
    lifeline.py    how children run: SIGINT restored, and they stop when their parent is gone
    ports.py       a TCP port free right now, for a child process to bind
"""
