"""``python -m raftsched.executor ...`` is ``raftsched-executor ...``."""

import sys

from raftsched.cli.executor import executor_main

sys.exit(executor_main())
