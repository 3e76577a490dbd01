// Package lab runs the emulated homelab: every inventory node as a host made
// of Linux namespaces on this machine, with real sshd, keepalived, kubeadm,
// etcd and control-plane binaries, and stand-ins only where a namespace
// cannot host the real thing (docs/lab.md).
//
// Layout of the network, chosen so that no lab address ever exists in the
// machine's own network namespace (if the lab were down, traffic to a lab
// address would otherwise leave through the machine's real uplink):
//
//	hl-br      the bridge, alone in its namespace (the root namespace has
//	           bridge-nf-call-iptables=1, which would filter lab traffic)
//	hl-gw      the gateway address; the provisioner's seat (see Dialer)
//	hl-NODE    one per node, its declared interface, MAC and address
//
// Those are the default lab's names; a lab in another directory has its
// own prefix (Names), so labs run side by side, even on one subnet.
//
// Every namespace, link, mount and process the lab makes is recorded in a
// state file, so down removes exactly those, by name and by PID.
package lab
