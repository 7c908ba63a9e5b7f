# A client's 3 MB upload through a select group's ct(zone=9,table=5) bucket, committed on its
# SYN with a mark, answers bypassing the tracker (the stateless reverse NAT): how many of
# its segments table 5 sees +est and how many +inv, and whether the +inv ones still carry
# the mark. Scratch bridge and namespaces of its own (not the testbed); run as root:
#   bash ctscratch-upload.sh > ctscratch-upload.out
. "$(dirname "$0")/scratch-bridge.sh"
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
