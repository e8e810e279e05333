import sys

from evoharness.cli import main

sys.exit(main())
