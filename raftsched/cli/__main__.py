"""``python -m raftsched.cli ...`` is ``raftsched ...``."""

import sys

from raftsched.cli import main

sys.exit(main())
