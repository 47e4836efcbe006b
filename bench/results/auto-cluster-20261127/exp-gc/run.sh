set -euo pipefail
cd /work/main
here=$(pwd)/bench; root=$(pwd); . bench/lib.sh
OUT=$1; mkdir -p $OUT
common="--num=2064888 --record_size=1024 --key_size=16 --threads=1 --quiet"
phase() { local engine=$1 tag=$2; shift 2; drop_caches >/dev/null; sleep 1
  echo "== $(date -u +%H:%M:%S) $engine $tag $*" | tee -a $OUT/log.txt
  bench/cgexec.sh $engine 1G $(engine_cmd $engine) $common --db=$DATA_DIR/ac-$engine "$@" > $OUT/$engine.$tag.txt 2>&1
  grep -E "(ycsb-e-run|gc|stats) +:|auto_cluster_passes=|L0=|level" $OUT/$engine.$tag.txt | head -6 | tee -a $OUT/log.txt; }
e=wisckey
rm -rf $DATA_DIR/ac-$e; sync; sleep 2
phase $e load --ycsb=e --reads=1000 --seed=301
phase $e long --ycsb=e --reads=100000 --use_existing_db=1 --seed=302
phase $e stats1 --benchmarks=stats --use_existing_db=1
phase $e short1 --ycsb=e --reads=10000 --use_existing_db=1 --seed=303
phase $e gc --benchmarks=gc --use_existing_db=1
phase $e stats2 --benchmarks=stats --use_existing_db=1
phase $e short2 --ycsb=e --reads=10000 --use_existing_db=1 --seed=304
du -sm $DATA_DIR/ac-$e | tee -a $OUT/log.txt
rm -rf $DATA_DIR/ac-$e
