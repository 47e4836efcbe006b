#!/usr/bin/env bash
# ab.sh: `wisckey serve --appendfsync everysec` before (engine default: writes wait up to
# 10 ms in the log's buffer) and after (write_through_to_os: each commit group handed to the
# OS before its replies), interleaved per cell with Debian's redis-server (AOF everysec, no
# RDB), on fresh databases on the real disk.
#   NEW=<wisckey after> BASE=<wisckey before> ROUNDS=3 N=50000 bash ab.sh > raw.txt
set -euo pipefail
: "${NEW:?}" "${BASE:?}"
ROUNDS=${ROUNDS:-3}
N=${N:-50000}
PORT=${PORT:-16390}
root=${DB_ROOT:-/var/tmp}/ab-everysec
for round in $(seq 1 "$ROUNDS"); do
  for size in 1024 16384; do
    for pipe in 1 16; do
      n=$N; [ "$size" = 16384 ] && n=$((N / 2))
      for which in new base redis; do
        bin=$NEW; [ "$which" = base ] && bin=$BASE
        rm -rf "$root"; mkdir -p "$root"
        if [ "$which" = redis ]; then
          redis-server --port "$PORT" --dir "$root" --appendonly yes --appendfsync everysec \
            --save '' >/dev/null 2>&1 &
        else
          "$bin" serve --db "$root/db" --port "$PORT" --appendfsync everysec 2>/dev/null &
        fi
        pid=$!
        for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
        res=$(redis-benchmark -p "$PORT" -t set,incr,mset -n "$n" -r 100000 -c 50 -P "$pipe" -d "$size" --csv -q 2>/dev/null \
          | grep -v '^"test"' | awk -F'","' '{gsub(/"/,"",$1); gsub(/"/,"",$2); printf "%s=%s ", $1, $2}')
        # CPU seconds the server used (user+sys) in this cell.
        cpu=$(awk '{print ($14+$15)/100}' /proc/$pid/stat)
        kill -TERM "$pid"; wait "$pid" || true
        echo "round $round size $size P $pipe $which: $res cpu=${cpu}s"
      done
    done
  done
done
rm -rf "$root"
