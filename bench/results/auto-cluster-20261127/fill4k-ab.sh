for r in 1 2 3; do for b in base new; do rm -rf /work/bench-data/ab4k; sync; echo 3 > /proc/sys/vm/drop_caches; sleep 2
printf "$r $b "; /work/main/bench/cgexec.sh ab 1G /tmp/ab/$b bench --num=522000 --value_size=4096 --key_size=16 --seed=301 --quiet --benchmarks=fillrandom --db=/work/bench-data/ab4k 2>&1 | grep -E "^fillrandom" ; done; done; rm -rf /work/bench-data/ab4k
