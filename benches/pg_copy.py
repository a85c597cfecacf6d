"""What PostgreSQL's backend spends inserting an upload's rows, by statement: the server's
`INSERT ... SELECT ... FROM UNNEST(...)` with the ids gathered in an array, against a binary
`COPY ... FROM STDIN` followed by one `SELECT` (the round trip a copy's ids would take), at
several rows a statement. Run by benches/pg_copy.sh on a database the server has set up (its
`campaigns` table and insert trigger); prints one line per statement and size: the backend's CPU
(from /proc) and the wall time, medians of RUNS runs.

    python3 benches/pg_copy.py DATABASE_URL ROWS RUNS
"""

import os
import statistics
import sys
import time

import psycopg

COLUMNS = '"name", "type", "description", "is_active", "created_dt", "updated_dt"'
UNNEST = (
    f'WITH ins AS (INSERT INTO "campaigns" ({COLUMNS}) '
    "SELECT u.a, u.b, u.c, %s::bool, %s::text, %s::text "
    "FROM UNNEST(%s::text[], %s::int8[], %s::text[]) AS u(a, b, c) "
    'RETURNING "id") SELECT array_agg("id") FROM ins'
)
COPY = f'COPY "campaigns" ({COLUMNS}) FROM STDIN (FORMAT binary)'
# A commit every this many rows, as the server's upload commits a span of 16 chunks of 1,000.
SPAN_ROWS = 16_000
NOW = "2026-01-01 00:00:00"


def backend_cpu(pid):
    """The backend's user and system CPU so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(url, rows, how, size):
    """Inserts `rows` rows `size` at a time with `how`; returns (backend CPU s, wall s)."""
    data = [(f"campaign {i}", i % 7, f"row number {i} of the benchmark") for i in range(rows)]
    with psycopg.connect(url) as conn:
        cur = conn.cursor()
        cur.execute('TRUNCATE "campaigns", "entity_count_deltas", "live_changes" CASCADE')
        conn.commit()
        pid = cur.execute("SELECT pg_backend_pid()").fetchone()[0]
        cpu0, t0 = backend_cpu(pid), time.monotonic()
        for at in range(0, rows, size):
            part = data[at : at + size]
            if how == "unnest":
                names, types, texts = (list(c) for c in zip(*part))
                cur.execute(UNNEST, (True, NOW, NOW, names, types, texts), prepare=True)
                got = len(cur.fetchone()[0])
            else:
                with cur.copy(COPY) as copy:
                    copy.set_types(["text", "int8", "text", "bool", "text", "text"])
                    for name, kind, text in part:
                        copy.write_row((name, kind, text, True, NOW, NOW))
                got = cur.rowcount
                cur.execute("SELECT current_setting('entiserve.inserted', true)").fetchone()
            if got != len(part):
                sys.exit(f"{how}: {got} rows or ids came back for {len(part)} rows")
            if (at + size) % SPAN_ROWS == 0:
                conn.commit()
        conn.commit()
        return backend_cpu(pid) - cpu0, time.monotonic() - t0


def main():
    url, rows, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(f"{rows} rows, a commit every {SPAN_ROWS}, medians of {runs} runs")
    print()
    print("| statement | rows a statement | backend CPU, s | wall, s |")
    print("| --- | ---: | ---: | ---: |")
    for how, size in [("unnest", 1000), ("copy", 1000), ("copy", 4000), ("copy", 16000)]:
        cpu, wall = zip(*(one_run(url, rows, how, size) for _ in range(runs)))
        label = {
            "unnest": "INSERT ... FROM UNNEST, ids gathered",
            "copy": "COPY (binary), then a SELECT",
        }[how]
        print(f"| {label} | {size} | {statistics.median(cpu):.2f} | {statistics.median(wall):.2f} |")


if __name__ == "__main__":
    main()
