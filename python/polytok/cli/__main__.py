"""`python -m polytok.cli`: the `polytok` script."""
import sys

from polytok.cli import main

sys.exit(main())
