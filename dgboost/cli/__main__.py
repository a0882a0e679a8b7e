"""``python -m dgboost.cli``: the ``dgboost`` command."""

import sys

from .commands import main

sys.exit(main())
