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

// A manifest kubeadm wrote before a flag was declared (an adopted cluster)
// is regenerated; one not written yet (a node still joining) is left to
// its join.
func TestComponentArgsDrift(t *testing.T) {
	apiserver := []byte(`apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  containers:
  - name: kube-apiserver
    command:
    - kube-apiserver
    - --advertise-address=10.0.0.140
    - --encryption-provider-config=/etc/kubernetes/encryption/config.yaml
`)
	flags := manifestFlags(apiserver)
	if flags["encryption-provider-config"] != "/etc/kubernetes/encryption/config.yaml" || flags["advertise-address"] != "10.0.0.140" {
		t.Fatalf("flags read: %v", flags)
	}
	in := ControlPlaneAddressArgs{ComponentArgs: map[string][]string{
		"kube-apiserver": {"encryption-provider-config=/etc/kubernetes/encryption/config.yaml"},
		"kube-scheduler": {"bind-address=127.0.0.1"},
	}}
	for _, tc := range []struct {
		name string
		live map[string]string
		want []string
	}{
		{"as declared", map[string]string{"kube-apiserver/encryption-provider-config": "/etc/kubernetes/encryption/config.yaml", "kube-scheduler/bind-address": "127.0.0.1"}, nil},
		{"flag missing", map[string]string{"kube-apiserver/advertise-address": "10.0.0.140", "kube-scheduler/bind-address": "127.0.0.1"}, []string{"kube-apiserver"}},
		{"other value", map[string]string{"kube-apiserver/encryption-provider-config": "/etc/kubernetes/encryption/config.yaml", "kube-scheduler/bind-address": "0.0.0.0"}, []string{"kube-scheduler"}},
		{"no manifests yet", map[string]string{}, nil},
	} {
		d := driftOf(in, ControlPlaneAddressState{ControlPlaneAddressArgs: in, LiveArgs: tc.live})
		if !slices.Equal(d.pods, tc.want) || d.address || len(d.certs) > 0 {
			t.Errorf("%s: pods %v address %v certs %v, want pods %v", tc.name, d.pods, d.address, d.certs, tc.want)
		}
	}
}
