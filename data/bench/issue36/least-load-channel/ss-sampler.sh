# samples the OpenFlow channel's socket queues every 0.1 s: time, then ss lines
while true; do
  t=$(date +%s.%N)
  ss -tnH state established '( sport = :6653 or dport = :6653 )' | awk -v t="$t" '{print t, $1, $2, $3, $4}'
  sleep 0.1
done
