"""`python -m sm_locust` is the `sm-locust` command."""

import sys

from sm_locust.cli import main

sys.exit(main())
