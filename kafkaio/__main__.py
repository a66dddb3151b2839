"""``python -m kafkaio``: the kafkaio command-line tool.

See ``python -m kafkaio --help``; the same as the ``kafkaio`` console script.
"""

from __future__ import annotations

import sys

from kafkaio.cli import main

if __name__ == "__main__":
    sys.exit(main())
