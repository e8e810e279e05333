import sys

from evoharness_app.cli import main

sys.exit(main())
