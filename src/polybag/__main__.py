import sys

from polybag.cli import main

sys.exit(main())
