import sys
from pathlib import Path

# Make `import workbook` work however pytest is started (bare `pytest` too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
