#!/usr/bin/env bash
# run-ycsb.sh: YCSB core workloads A-F on every engine through the same generator
# (`--ycsb=w --record_size=N` in wisckey and every peer), each engine in its own cgroup-v1
# memory limit (bench/cgexec.sh), page cache dropped before every phase; prints Markdown
# tables: ops/sec per workload and engine, the ratio to LevelDB (as the paper's Fig. 15), and
# the p99 latency of each operation type.
#
# Order per engine (YCSB's recommended sequence): load (fresh DB), then A, B, C, F, D on that
# DB, then a fresh load and E (E's inserts and scans would otherwise follow D's inserts).
# Every run phase is its own process on a DB loaded by an earlier one (--use_existing_db=1),
# page cache dropped before it, so it starts cold. A load is a process of its own
# (--ycsb=<w> --ycsb_load_only=1, output <engine>.<w>-load.txt), followed by settle() from
# lib.sh: unmeasured rounds of YCSB C (reads only; seed SEED+1, 1 thread, SETTLE_OPS reads)
# until a round's process wrote < 8 MiB, so the run phase does not share the device with the
# compaction debt of the load (as run-suite.sh settles before its read phases). Rounds go
# through the pread / MADV_RANDOM variant of stock LevelDB / Badger (same DB format). An
# engine in AGED_ENGINES is aged between its load and the settle rounds (below).
#
# Parameters (environment):
#   RECORDS=1000000 (records loaded) OPS=1000000 (operations per thread per workload)
#   RECORD_SIZE=1024 KEY_SIZE=16 THREADS=1 SEED=301 MEM_LIMIT=1G
#   SETTLE_ROUNDS=5 (at most; 0 = no settling) SETTLE_OPS=min(OPS, 20000) (reads per settle
#     round; run-suite.sh's YCSB OPS are below it, and 20000 is its readrandom count at 1 KiB)
#   READ_TIMEOUT=120 (seconds; a settle round still running is killed)
#   ENGINES="wisckey leveldb rocksdb rocksdb-blob badger"   WORKLOADS="a b c f d e"
#   ENGINE_WORKLOADS="" (engine:w1,w2 pairs: those engines run only those workloads, e.g.
#     "wisckey-gc:a wisckey-nogc:a" with AGED_ENGINES for YCSB A with GC at work; their
#     other cells stay empty)
#   AGED_ENGINES="" (engines whose DB is aged before it is settled and measured: right after
#     each load, one unmeasured process runs AGE_OPS operations of YCSB A with value-log GC
#     off (--gc_space_amp_target=inf, seed SEED+2; output <engine>.<w>-age.log), so the
#     measured phases find garbage in the log, and their run phases do AGED_OPS operations;
#     wisckey engines only, e.g. "wisckey-gc wisckey-nogc" for YCSB A on an aged DB with GC
#     busy and with GC off, two DBs aged alike)
#   AGE_OPS=RECORDS (about RECORDS/2 updates: the log ends ~1.5x the live data)
#   AGED_OPS=max(OPS, 100000) (the aged engines' run phases: GC's thread first looks 1 s
#     after open, and run-suite.sh's OPS, 10,000 at 1 KiB and 2,000 at 16 KiB, last about a
#     second; 100,000 take 3-5 s. So they are comparable with each other, not operation for
#     operation with the other engines' cells)
#   DATA_DIR=/work/bench-data (real disk)   OUT_DIR=bench/results/ycsb-<timestamp>
#   WISCKEY_BIN=$CARGO_TARGET_DIR/release/wisckey-bench  WISCKEY_FLAGS="" EXTRA_FLAGS=""
#   CHECK=1: agreement check instead of a measurement: defaults become RECORDS=20000
#     OPS=10000 THREADS=1, and the script compares every engine's per-operation counts and
#     found counts (the "count N  found F" fields) with the first engine's, workload by
#     workload; exits 1 on any difference.
# Run bench/setup.sh first. Needs root (cgroups, drop_caches). Each DB is deleted after use.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
CHECK=${CHECK:-0}
if [[ $CHECK == 1 ]]; then
  RECORDS=${RECORDS:-20000} OPS=${OPS:-10000} THREADS=${THREADS:-1}
fi
RECORDS=${RECORDS:-1000000}
OPS=${OPS:-1000000}
RECORD_SIZE=${RECORD_SIZE:-1024}
KEY_SIZE=${KEY_SIZE:-16}
THREADS=${THREADS:-1}
SEED=${SEED:-301}
MEM_LIMIT=${MEM_LIMIT:-1G}
ENGINES=${ENGINES:-"wisckey leveldb rocksdb rocksdb-blob badger"}
WORKLOADS=${WORKLOADS:-"a b c f d e"}
ENGINE_WORKLOADS=${ENGINE_WORKLOADS:-}
AGED_ENGINES=${AGED_ENGINES:-}
AGE_OPS=${AGE_OPS:-$RECORDS}
AGED_OPS=${AGED_OPS:-$((OPS > 100000 ? OPS : 100000))}
SETTLE_ROUNDS=${SETTLE_ROUNDS:-5}
SETTLE_OPS=${SETTLE_OPS:-$((OPS < 20000 ? OPS : 20000))}
READ_TIMEOUT=${READ_TIMEOUT:-120}
OUT_DIR=${OUT_DIR:-$here/results/ycsb-$(date -u +%Y%m%dT%H%M%SZ)}

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
mkdir -p "$OUT_DIR"
require_real_disk "$DATA_DIR"

# workloads engine $1 runs: its ENGINE_WORKLOADS entry, else WORKLOADS
workloads_of() {
  local pair
  for pair in $ENGINE_WORKLOADS; do
    if [[ ${pair%%:*} == "$1" ]]; then
      echo "${pair#*:}" | tr ',' ' '
      return 0
    fi
  done
  echo "$WORKLOADS"
}
# ops/sec on line "$2 : ..." of file $1 (nothing when the file is missing)
ops_of() { [[ -f $1 ]] || return 0; awk -v b="$2" '$1==b && $2==":" {for(i=1;i<=NF;i++) if($i=="ops/sec") print $(i-1)}' "$1" | head -1; }
# "read 12.3 / update 4.5": p99 of each operation type after the run line of file $1
p99s_of() {
  [[ -f $1 ]] || return 0
  awk '/-run +:/ {run=1; next} run && $2==":" && $3=="count" {
         for(i=1;i<=NF;i++) if($i=="p99") v=$(i+1); out=out (out?" / ":"") $1 " " v }
       END {print out}' "$1"
}
# the agreement fields: "op count N [found F]" per operation line of the run phase
counts_of() {
  awk '/-run +:/ {run=1; next} run && $2==":" && $3=="count" {
         line=$1 " count " $4; if ($5=="found") line=line " found " $6; print line }' "$1"
}

# the DB's shape (every process); the loads and run phases add $measured, the settle rounds
# their own --reads/--threads/--seed
common="--num=$RECORDS --record_size=$RECORD_SIZE --key_size=$KEY_SIZE --quiet $EXTRA_FLAGS"
measured="--reads=$OPS --threads=$THREADS --seed=$SEED"
{
  echo "# YCSB run $(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)"
  echo "RECORDS=$RECORDS OPS=$OPS RECORD_SIZE=$RECORD_SIZE KEY_SIZE=$KEY_SIZE THREADS=$THREADS SEED=$SEED MEM_LIMIT=$MEM_LIMIT CHECK=$CHECK"
  echo "SETTLE_ROUNDS=$SETTLE_ROUNDS SETTLE_OPS=$SETTLE_OPS READ_TIMEOUT=$READ_TIMEOUT"
  echo "ENGINES=$ENGINES WORKLOADS=$WORKLOADS ENGINE_WORKLOADS=$ENGINE_WORKLOADS AGED_ENGINES=$AGED_ENGINES AGE_OPS=$AGE_OPS AGED_OPS=$AGED_OPS"
  echo "DATA_DIR=$DATA_DIR ($fstype)"
  echo "WISCKEY_FLAGS=$WISCKEY_FLAGS EXTRA_FLAGS=$EXTRA_FLAGS"
} | tee "$OUT_DIR/params.txt"

# run_one ENGINE TAG FLAGS...: one process in the engine's cgroup on $DATA_DIR/ENGINE, page
# cache dropped before it; output $OUT_DIR/<engine>.<tag>.txt
run_one() {
  local engine=$1 tag=$2 cmd
  shift 2
  cmd=$(engine_cmd "$engine")
  drop_caches
  echo "== $engine: $tag $*" | tee -a "$OUT_DIR/log.txt"
  # shellcheck disable=SC2086
  if ! "$here/cgexec.sh" "$engine" "$MEM_LIMIT" $cmd $common $measured --db="$DATA_DIR/$engine" "$@" \
    > "$OUT_DIR/$engine.$tag.txt" 2>&1; then
    echo "$engine $tag failed:"; tail "$OUT_DIR/$engine.$tag.txt"
    return 1
  fi
  grep -E 'ops/sec|count' "$OUT_DIR/$engine.$tag.txt" || true
}

# the engine settle rounds run as: the pread / MADV_RANDOM variant of a stock mmap engine
# (same DB; its thrashing reads would make each round take minutes), wisckey with GC off for
# wisckey-gc (GC would collect an aged DB's garbage before the measured phase, and its writes
# would keep every round above settle()'s threshold), else the engine itself
settle_engine_of() {
  case $1 in
    leveldb) echo leveldb-pread ;;
    badger) echo badger-madv ;;
    wisckey-gc) echo wisckey-nogc ;;
    *) echo "$1" ;;
  esac
}

# load_db ENGINE W: a fresh DB loaded by a load-only process (labelled ycsb-<w>-load), aged
# when ENGINE is one of $AGED_ENGINES (AGE_OPS operations of YCSB A with GC off, labelled
# <w>-age; output renamed .log so neither summary.md nor the report reads it), then settled
# (lib.sh) with unmeasured YCSB C rounds seeded SEED+1
load_db() {
  local engine=$1 w=$2
  rm -rf "${DATA_DIR:?}/$engine"
  run_one "$engine" "$w-load" --ycsb="$w" --ycsb_load_only=1 || return 1
  if [[ " $AGED_ENGINES " == *" $engine "* ]]; then
    # later flags win (wisckey-bench bench takes a repeated flag's last value)
    local aged=0
    run_one "$engine" "$w-age" --ycsb=a --use_existing_db=1 --reads="$AGE_OPS" --threads=1 \
      --seed=$((SEED + 2)) --gc_space_amp_target=inf || aged=$?
    # renamed whatever its exit: a .txt would put the aging run's figure in the report
    mv "$OUT_DIR/$engine.$w-age.txt" "$OUT_DIR/$engine.$w-age.log"
    if ((aged != 0)); then
      echo "$engine: aging failed (see $engine.$w-age.log)" | tee -a "$OUT_DIR/log.txt"
      return 1
    fi
  fi
  if ((SETTLE_ROUNDS > 0)); then
    # shellcheck disable=SC2086
    settle "$(settle_engine_of "$engine")" "$DATA_DIR/$engine" "$OUT_DIR/$engine.$w" $common \
      --ycsb=c --threads=1 --reads="$SETTLE_OPS" --seed=$((SEED + 1))
  fi
}

for engine in $ENGINES; do
  rm -rf "${DATA_DIR:?}/$engine"
  loaded=0
  for w in $(workloads_of "$engine"); do
    if [[ $w == e || $loaded == 0 ]]; then
      # A failed load leaves its workloads' cells empty (the run phases would otherwise
      # measure an empty or partial database) until the next load.
      if load_db "$engine" "$w"; then loaded=1; else loaded=failed; fi
    fi
    if [[ $loaded == failed ]]; then
      echo "$engine ycsb-$w: not run (its load or aging failed)" | tee -a "$OUT_DIR/log.txt"
      continue
    fi
    ops=()
    [[ " $AGED_ENGINES " == *" $engine "* ]] && ops=(--reads="$AGED_OPS")
    run_one "$engine" "$w" --ycsb="$w" --use_existing_db=1 "${ops[@]}" || true
  done
  rm -rf "${DATA_DIR:?}/$engine"
done

if [[ $CHECK == 1 ]]; then
  status=0
  first=${ENGINES%% *}
  {
    echo
    echo "| workload | engine | per-op counts (run phase) | agrees with $first |"
    echo "|---|---|---|---|"
    for w in $WORKLOADS; do
      want=$(counts_of "$OUT_DIR/$first.$w.txt" | paste -sd';')
      for engine in $ENGINES; do
        got=$(counts_of "$OUT_DIR/$engine.$w.txt" | paste -sd';')
        ok=yes
        if [[ -z $got || $got != "$want" ]]; then ok=NO; status=1; fi
        echo "| $w | $engine | ${got//;/; } | $ok |"
      done
    done
  } > "$OUT_DIR/check.md" # not a pipe: `status` must be set in this shell, not a subshell
  cat "$OUT_DIR/check.md"
  if [[ $status == 0 ]]; then echo "CHECK: all engines agree"; else echo "CHECK: MISMATCH"; fi
  echo "raw outputs in $OUT_DIR"
  exit $status
fi

{
  echo
  first_w=${WORKLOADS%% *}
  header="| engine | load (${first_w^^}) ops/s |" sep="|---|---:|"
  for w in $WORKLOADS; do header+=" ${w^^} ops/s |"; sep+="---:|"; done
  echo "$header"; echo "$sep"
  for engine in $ENGINES; do
    row="| $engine | $(ops_of "$OUT_DIR/$engine.$first_w-load.txt" "ycsb-$first_w-load") |"
    for w in $WORKLOADS; do row+=" $(ops_of "$OUT_DIR/$engine.$w.txt" "ycsb-$w-run") |"; done
    echo "$row"
  done
  echo
  base_engine=leveldb # stock LevelDB as in the paper; its pread variant if only that one ran
  if [[ " $ENGINES " != *" leveldb "* && " $ENGINES " == *" leveldb-pread "* ]]; then base_engine=leveldb-pread; fi
  echo "Normalised to $base_engine (engine ops/s ÷ $base_engine ops/s, as the paper's Fig. 15):"
  echo
  echo "$header"; echo "$sep"
  for engine in $ENGINES; do
    base=$(ops_of "$OUT_DIR/$base_engine.$first_w-load.txt" "ycsb-$first_w-load" 2>/dev/null || true)
    row="| $engine | $(ratio "$(ops_of "$OUT_DIR/$engine.$first_w-load.txt" "ycsb-$first_w-load")" "$base") |"
    for w in $WORKLOADS; do
      base=$(ops_of "$OUT_DIR/$base_engine.$w.txt" "ycsb-$w-run" 2>/dev/null || true)
      row+=" $(ratio "$(ops_of "$OUT_DIR/$engine.$w.txt" "ycsb-$w-run")" "$base") |"
    done
    echo "$row"
  done
  echo
  echo "p99 latency per operation type, µs (run phase):"
  echo
  header="| engine |" sep="|---|"
  for w in $WORKLOADS; do header+=" ${w^^} |"; sep+="---|"; done
  echo "$header"; echo "$sep"
  for engine in $ENGINES; do
    row="| $engine |"
    for w in $WORKLOADS; do row+=" $(p99s_of "$OUT_DIR/$engine.$w.txt") |"; done
    echo "$row"
  done
} | tee "$OUT_DIR/summary.md"
echo "raw outputs in $OUT_DIR"
