package provider

import (
	"slices"
	"testing"
)

func TestDriftOf(t *testing.T) {
	in := ControlPlaneAddressArgs{Address: "10.0.0.140", APIServerSANs: []string{"10.0.0.100", "10.0.0.140", "cp-1"}, EtcdSANs: []string{"10.0.0.140", "cp-1"}}
	healthy := ControlPlaneAddressState{ControlPlaneAddressArgs: in, LiveAdvertise: "10.0.0.140", LiveEtcdPeer: "10.0.0.140", LiveNodeIP: "10.0.0.140",
		LiveKubeconfig: map[string]string{"kubelet.conf": "10.0.0.140", "admin.conf": "10.0.0.100"},
		LiveSANs:       map[string]string{"apiserver.crt": "10.0.0.100,10.0.0.140,cp-1", "etcd/server.crt": "10.0.0.140,::1,cp-1", "etcd/peer.crt": "10.0.0.140,::1,cp-1"}}
	if d := driftOf(in, healthy); len(d.problems) > 0 {
		t.Errorf("healthy node drifts: %v", d.problems)
	}

	moved := healthy
	moved.LiveAdvertise, moved.LiveEtcdPeer, moved.LiveNodeIP = "10.0.0.120", "10.0.0.120", "10.0.0.120"
	moved.LiveKubeconfig = map[string]string{"kubelet.conf": "10.0.0.120", "admin.conf": "10.0.0.100"}
	// The old certificate exists and is valid: only its SANs tell it is wrong.
	moved.LiveSANs = map[string]string{"apiserver.crt": "10.0.0.100,10.0.0.120,cp-1", "etcd/server.crt": "10.0.0.120,::1,cp-1", "etcd/peer.crt": "10.0.0.120,::1,cp-1"}
	d := driftOf(in, moved)
	if !d.address {
		t.Error("a moved node's manifests were not flagged")
	}
	if !slices.Equal(d.certs, []string{"apiserver.crt", "etcd/peer.crt", "etcd/server.crt"}) {
		t.Errorf("certs to regenerate: %v", d.certs)
	}

	extra := healthy
	extra.LiveSANs = map[string]string{"apiserver.crt": "10.0.0.100,10.0.0.140,10.0.0.99,cp-1", "etcd/server.crt": "10.0.0.140,::1,cp-1", "etcd/peer.crt": "10.0.0.140,::1,cp-1"}
	if d := driftOf(in, extra); !slices.Equal(d.certs, []string{"apiserver.crt"}) || d.address {
		t.Errorf("a stale extra SAN: %+v", d)
	}
}
