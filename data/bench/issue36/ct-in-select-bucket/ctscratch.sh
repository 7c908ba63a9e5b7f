set -u
BR=malbscratch0
cleanup() {
  ovs-vsctl --if-exists del-br $BR
  for n in c s1; do ip netns pids malbscratch-$n 2>/dev/null | xargs -r kill 2>/dev/null; ip netns del malbscratch-$n 2>/dev/null; done
}
cleanup
ovs-vsctl add-br $BR -- set bridge $BR datapath_type=netdev protocols=OpenFlow13,OpenFlow15
i=1
for n in c s1; do
  ip netns add malbscratch-$n
  ip link add mscr-$n type veth peer name mscrp-$n
  ip link set mscr-$n netns malbscratch-$n
  ip netns exec malbscratch-$n ip link set lo up
  ip netns exec malbscratch-$n ip link set mscr-$n address 02:00:00:00:09:0$i
  ip link set mscrp-$n up
  ethtool -K mscrp-$n tx off >/dev/null 2>&1
  ip netns exec malbscratch-$n ethtool -K mscr-$n tx off >/dev/null 2>&1
  ovs-vsctl add-port $BR mscrp-$n -- set interface mscrp-$n ofport_request=$i
  i=$((i+1))
done
ip netns exec malbscratch-c ip addr add 10.9.0.1/24 dev mscr-c
ip netns exec malbscratch-c ip link set mscr-c up
ip netns exec malbscratch-s1 ip addr add 10.9.0.11/24 dev mscr-s1
ip netns exec malbscratch-s1 ip link set mscr-s1 up
ip netns exec malbscratch-c ip neigh add 10.9.0.100 lladdr 02:00:00:00:00:64 dev mscr-c
VIPMAC=02:00:00:00:00:64; S1MAC=02:00:00:00:09:02
OF="ovs-ofctl -O OpenFlow13"
$OF del-flows $BR
$OF add-flow $BR "table=0,priority=1,actions=NORMAL"
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
