import sys

from workbook.fashion_data.cli import main

sys.exit(main())
