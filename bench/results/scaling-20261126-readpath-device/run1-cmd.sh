set -u
R=/tmp/res; mkdir -p $R
nproc; grep -m1 'model name' /proc/cpuinfo; df -h /tmp | tail -1
for r in 1 2; do for b in base new; do
  BENCH_FLAGS=--gc_space_amp_target=inf DATA_DIR=/tmp/ws-$b-$r PHASES=read THREADS="${TH:-1 2 4 8 16}" NUM=${NUM:-250000} READS=${READS:-200000} WISCKEY_BIN=.devbin/$b OUT_DIR=$R/$b-$r bash bench/run-scaling.sh 2>&1 | grep -E "readrandom|cpu=" | tr '\n' ' ' | sed "s/^/$b r$r: /"; echo
done; done
.devbin/new bench --quiet --benchmarks=fillrandom --num=$((${NUM:-250000}*8)) --value_size=1024 --db=/tmp/rww > $R/rww-load.txt 2>&1
for r in 1 2; do for b in base new; do for t in ${RWW_TH:-8 16}; do
  .devbin/$b bench --quiet --benchmarks=readwhilewriting --threads=$t --num=$((${NUM:-250000}*8)) --reads=${READS:-200000} --value_size=1024 --gc_space_amp_target=inf --use_existing_db=1 --db=/tmp/rww > $R/rww-$b-$t-$r.txt 2>&1
  echo "rww $b t$t r$r: $(grep -E '^readwhilewriting' $R/rww-$b-$t-$r.txt)"
done; done; done
tar czf ${OUT:-/tmp}/res.tgz -C $R .
