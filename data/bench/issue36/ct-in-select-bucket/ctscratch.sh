. "$(dirname "$0")/scratch-bridge.sh"
MODE=$1
if [ "$MODE" = plain ]; then
  $OF add-flow $BR "table=0,priority=10,tcp,nw_dst=10.9.0.100,tp_dst=8080,actions=ct(zone=9,table=5)"
else
  $OF add-group $BR "group_id=1,type=select,bucket=actions=ct(zone=9,table=5)"
  $OF add-flow $BR "table=0,priority=10,tcp,nw_dst=10.9.0.100,tp_dst=8080,actions=group:1"
fi
TO_S1="set_field:$S1MAC->eth_dst,set_field:10.9.0.11->ip_dst,output:2"
$OF add-flow $BR "table=5,priority=30,ct_state=+trk+new,tcp,tcp_flags=+syn-ack,actions=ct(commit,zone=9),$TO_S1"
$OF add-flow $BR "table=5,priority=20,ct_state=+trk+est,tcp,actions=$TO_S1"
$OF add-flow $BR "table=5,priority=20,ct_state=+trk+inv,tcp,actions=$TO_S1"
$OF add-flow $BR "table=5,priority=10,tcp,actions=$TO_S1"
$OF add-flow $BR "table=0,priority=10,tcp,in_port=2,nw_src=10.9.0.11,tp_src=8080,actions=set_field:$VIPMAC->eth_src,set_field:10.9.0.100->ip_src,output:1"
ip netns exec malbscratch-s1 python3 -m http.server 8080 --bind 10.9.0.11 >/dev/null 2>&1 &
sleep 1.5
ip netns exec malbscratch-c ping -c1 -W1 10.9.0.11 >/dev/null
for k in 1 2 3; do ip netns exec malbscratch-c curl -s -o /dev/null -w "curl %{http_code} %{time_total}\n" --max-time 5 http://10.9.0.100:8080/; done
sleep 2; $OF dump-flows $BR table=5 | sed 's/cookie=0x0, //; s/duration=[^,]*, //'
ovs-appctl dpctl/dump-conntrack zone=9 | head -5
cleanup
