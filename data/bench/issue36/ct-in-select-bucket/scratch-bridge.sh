# The scratch bridge both checks use: malbscratch0 (userspace datapath) and two network
# namespaces, a client (10.9.0.1) and a server (10.9.0.11) behind the VIP 10.9.0.100;
# sourced by ctscratch.sh and ctscratch-upload.sh, whose cleanup removes them.
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
