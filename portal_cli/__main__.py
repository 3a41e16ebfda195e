"""``python -m portal_cli`` = ``gpuq``."""

import sys

from portal_cli.main import main

sys.exit(main())
