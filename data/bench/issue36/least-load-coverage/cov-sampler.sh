# every 0.5 s: time, ovs-vswitchd's xlate_actions and rev_flow_table coverage counters
while true; do
  echo "$(date +%s.%N) $(ovs-appctl coverage/read-counter xlate_actions) $(ovs-appctl coverage/read-counter rev_flow_table)"
  sleep 0.5
done
