#!/bin/bash
# time, ovs-vswitchd ticks, ryu-manager ticks (sum), all busy ticks, all ticks
out=/work/main/results/cpu-samples.csv
echo "t,ovs_ticks,ryu_ticks,busy_ticks,total_ticks" > $out
while [ ! -e /work/main/results/design-chain.done ]; do
  ovs=$(pgrep -x ovs-vswitchd | head -1)
  o=$(awk '{print $14+$15}' /proc/$ovs/stat 2>/dev/null)
  r=0; for p in $(pgrep -f "ryu_apps.osken_manager|ryu-manager"); do v=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); r=$((r+${v:-0})); done
  read -r _ u n s i w x y z _ < /proc/stat
  echo "$(date +%s),${o:-0},$r,$((u+n+s+x+y+z)),$((u+n+s+i+w+x+y+z))" >> $out
  sleep 5
done
