"""The records of tool processes on a machine (`activities.orphans`): a sweep stops what a
dead worker's calls left running, marks the record for a next attempt, and removes it
once old; a live worker's records are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from duragent.activities.orphans import (
    ProcessRecords,
    process_identity,
    process_start_ticks,
)
from duragent.activities.tools import process_group_alive


def record_in_another_process(folder: Path, key: str, pgid: int) -> None:
    """What a worker that then died leaves: the record of a call it ran, naming a group."""
    code = (
        "import sys; from pathlib import Path\n"
        "from duragent.activities.orphans import ProcessRecords, process_identity\n"
        "records = ProcessRecords(Path(sys.argv[1]))\n"
        "record = records.begin(sys.argv[2])\n"
        "records.add_process(sys.argv[2], record, process_identity(int(sys.argv[3])))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(folder), key, str(pgid)], check=True)


async def test_a_sweep_stops_a_dead_workers_processes_and_leaves_a_live_ones(
    tmp_path: Path,
) -> None:
    records = ProcessRecords(tmp_path / "records")
    orphan = subprocess.Popen(["sleep", "60"], start_new_session=True)
    alive = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        # Its next attempt ran on another machine, or its run was aborted: nobody here
        # reads it again.
        record_in_another_process(tmp_path / "records", "lost", orphan.pid)
        mine = records.begin("mine")
        records.add_process("mine", mine, process_identity(alive.pid))
        assert mine.owner == {"pid": os.getpid(), "started": process_start_ticks(os.getpid())}

        assert await records.sweep() == ["lost"]
        orphan.wait(timeout=10)
        assert not process_group_alive(orphan.pid)
        assert process_group_alive(alive.pid)
        swept = records.read("lost")
        assert swept is not None and swept.swept_at is not None
        assert [i["pgid"] for i in swept.swept] == [orphan.pid]

        assert await records.sweep(kept_s=3600) == []  # swept once; kept for a while
        assert records.read("lost") is not None
        await records.sweep(kept_s=0)
        assert records.read("lost") is None
        assert records.read("mine") is not None
    finally:
        for process in (orphan, alive):
            process.kill()
            process.wait()
