# A client's 3 MB upload through a select group's ct(zone=9,table=5) bucket, committed on its
# SYN with a mark, answers bypassing the tracker (the stateless reverse NAT): how many of
# its segments table 5 sees +est and how many +inv, and whether the +inv ones still carry
# the mark. Scratch bridge and namespaces of its own (not the testbed); run as root:
#   bash ctscratch-upload.sh > ctscratch-upload.out
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
$OF add-group $BR "group_id=1,type=select,bucket=actions=ct(zone=9,table=5)"
$OF add-flow $BR "table=0,priority=10,tcp,nw_dst=10.9.0.100,tp_dst=9090,actions=group:1"
TO_S1="set_field:$S1MAC->eth_dst,set_field:10.9.0.11->ip_dst,output:2"
$OF add-flow $BR "table=5,priority=30,ct_state=+trk+new,tcp,tcp_flags=+syn-ack,actions=ct(commit,zone=9,exec(set_field:7->ct_mark)),$TO_S1"
$OF add-flow $BR "table=5,priority=20,ct_state=+trk+est,tcp,actions=$TO_S1"
$OF add-flow $BR "table=5,priority=20,ct_state=+trk+inv,ct_mark=7,tcp,actions=$TO_S1"
$OF add-flow $BR "table=5,priority=10,tcp,actions=$TO_S1"
$OF add-flow $BR "table=0,priority=10,tcp,in_port=2,nw_src=10.9.0.11,tp_src=9090,actions=set_field:$VIPMAC->eth_src,set_field:10.9.0.100->ip_src,output:1"
ip netns exec malbscratch-s1 python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.9.0.11", 9090)); s.listen(8)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
c.sendall(str(n).encode()); c.close()' &
sleep 1
ip netns exec malbscratch-c python3 -c '
import socket
s = socket.create_connection(("10.9.0.100", 9090), timeout=10)
s.sendall(b"x" * 3_000_000); s.shutdown(socket.SHUT_WR)
print("server got", s.recv(100).decode(), "bytes")'
sleep 1; $OF dump-flows $BR table=5 | sed 's/cookie=0x0, //; s/duration=[^,]*, //'
cleanup
