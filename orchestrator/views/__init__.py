"""What a person sees of a run: live while it runs, then listed, shown, tailed and reported from its directory.

runview.py      a run read back from its directory (RunView, TaskView: attempts, usage, conversations);
                `load_run_view(runs_dir, run)` is the entry the viewers below read through
progress.py     while a run runs: a rich live view on a terminal, periodic log lines otherwise (Display);
                the status colours and counts every view shares
columns.py      tables and paragraphs drawn to fit 80 columns: ids whole, the other cells give way
tables.py       the tables of runs (`ga runs list`) and of tasks
runlist.py      the runs under a runs directory (a damaged one is one row), `last`, the resume command
outcome.py      what a task's files say of how it ended, for the exit rule (orchestrator/exitcodes.py)
tail.py         a run's ledger events, one line each (`ga runs tail`, -f to follow)
digest.py       the end of a run too large for a row per task (`ga fanout`)
runstream.py    `ga runs show RUN` as a stream: rows printed as results.jsonl is read, bounded memory
conversation.py one task's conversation, turn by turn (`ga runs show RUN TASK`), or a session's
report.py       one self-contained HTML page and report.md (`ga runs report`; report_page.html)
"""
