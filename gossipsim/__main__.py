"""``python -m gossipsim ...``: the command line (as the ``gossipsim`` command)."""

import sys

from gossipsim.cli.parser import main

if __name__ == "__main__":
    sys.exit(main())
