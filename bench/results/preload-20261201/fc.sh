#!/usr/bin/env bash
# fc.sh TAG: after d.sh's D run, resident pages per file type
DB=/work/bench-data/d-$1
for ext in sst vlog mem; do
  ls $DB/*.$ext >/dev/null 2>&1 || continue
  fincore -b -n -o RES,SIZE $DB/*.$ext | awk -v e=$ext '{r+=$1; s+=$2} END {printf "%s resident %.1f MiB of %.1f MiB\n", e, r/2^20, s/2^20}'
done
