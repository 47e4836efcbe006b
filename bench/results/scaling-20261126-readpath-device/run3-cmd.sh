set -u
R=/tmp/res3; mkdir -p $R
NUM=${NUM:-2000000}; READS=${READS:-200000}
nproc; uptime
.devbin/new bench --quiet --benchmarks=fillrandom --num=$NUM --value_size=1024 --db=/tmp/rd > $R/load.txt 2>&1
grep -E '^fillrandom' $R/load.txt
for r in 1 2 3; do for t in ${TH:-8 16}; do for b in new memshard; do
  .devbin/$b bench --quiet --benchmarks=readrandom --threads=$t --num=$NUM --reads=$READS --value_size=1024 --gc_space_amp_target=inf --use_existing_db=1 --db=/tmp/rd > $R/rr-$b-$t-$r.txt 2>&1
  echo "r$r t$t $b: $(grep -E '^readrandom' $R/rr-$b-$t-$r.txt | grep -oE '[0-9]+ ops/sec') $(grep -m1 -oE 'cpu=[0-9]+% \(user\+sys [0-9.]+ s' $R/rr-$b-$t-$r.txt)"
done; done; done
for r in 1 2; do for b in new memshard; do
  .devbin/$b bench --quiet --benchmarks=readwhilewriting --threads=16 --num=$NUM --reads=$READS --value_size=1024 --gc_space_amp_target=inf --use_existing_db=1 --db=/tmp/rd > $R/rww-$b-$r.txt 2>&1
  echo "rww16 r$r $b: $(grep -E '^readwhilewriting' $R/rww-$b-$r.txt | grep -oE '[0-9]+ ops/sec')"
  .devbin/$b bench --quiet --benchmarks=fillrandom --threads=16 --num=100000 --value_size=1024 --db=/tmp/fill-$b-$r > $R/fill16-$b-$r.txt 2>&1; rm -rf /tmp/fill-$b-$r
  echo "fill16 r$r $b: $(grep -E '^fillrandom' $R/fill16-$b-$r.txt | grep -oE '[0-9]+ ops/sec')"
done; done
tar czf ${OUT:-/tmp}/res3.tgz -C $R .
