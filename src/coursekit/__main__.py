import sys

from coursekit.cli import main

sys.exit(main())
