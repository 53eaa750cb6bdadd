"""`python -m rageval`: the command line."""

import sys

from rageval.cli import main

sys.exit(main())
