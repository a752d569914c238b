"""`python -m cli`: the `ga` command from a checkout (what the console script runs)."""
from cli import app

app()
