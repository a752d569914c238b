"""Write schemas/*.schema.json from the record models (orchestrator/records.py): run after changing them."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.records import write_schemas  # noqa: E402

for path in write_schemas():
    print(path)
