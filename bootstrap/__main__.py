import sys

from bootstrap.environment import main

sys.exit(main())
