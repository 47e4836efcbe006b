set -u
R=/tmp/res2; mkdir -p $R
NUM=${NUM:-2000000}; READS=${READS:-200000}
.devbin/new bench --quiet --benchmarks=fillrandom --num=$NUM --value_size=1024 --db=/tmp/rd > $R/load.txt 2>&1
grep -E '^fillrandom' $R/load.txt
for r in 1 2; do for t in ${TH:-1 4 8 16}; do for b in base view caches new; do
  .devbin/$b bench --quiet --benchmarks=readrandom --threads=$t --num=$NUM --reads=$READS --value_size=1024 --gc_space_amp_target=inf --use_existing_db=1 --db=/tmp/rd > $R/rr-$b-$t-$r.txt 2>&1
  echo "r$r t$t $b: $(grep -E '^readrandom' $R/rr-$b-$t-$r.txt | grep -oE '[0-9]+ ops/sec') $(grep -m1 -oE 'cpu=[0-9]+%' $R/rr-$b-$t-$r.txt)"
done; done; done
tar czf ${OUT:-/tmp}/res2.tgz -C $R .
