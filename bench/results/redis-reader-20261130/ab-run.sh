# Sourced by ab-reader.sh, ab-readers.sh and ab-default.sh: run NAME CMD... starts a server
# on port 16401 in an empty /var/tmp/pg, writes 50,000 SETs (D bytes, -P 16 -c 50), then
# measures N GETs (-P ${P:-16} -c 50), the server's CPU ticks over them and its thread count
# after them (a blocking pool that was used still has its threads).
run() { local name=$1; shift
  rm -rf /var/tmp/pg; mkdir -p /var/tmp/pg; sync; sleep 1
  "$@" >/dev/null 2>&1 & local pid=$!
  for i in $(seq 50); do redis-cli -p 16401 ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-benchmark -p 16401 -t set -n 50000 -r 50000 -d ${D:-1024} -P 16 -c 50 -q >/dev/null
  local c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local r=$(redis-benchmark -p 16401 -t get -n ${N:-600000} -r 50000 -d ${D:-1024} -P ${P:-16} -c 50 -q | tr '\r' '\n' | grep "requests per second" | tail -1)
  local c1=$(awk '{print $14+$15}' /proc/$pid/stat) t=$(ls /proc/$pid/task | wc -l)
  redis-cli -p 16401 shutdown nosave >/dev/null 2>&1; wait
  echo "$name $r cpu_ticks=$((c1-c0)) threads=$t"; }
