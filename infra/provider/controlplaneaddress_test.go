package provider

import (
	"maps"
	"slices"
	"testing"

	"github.com/homelab-dev/homelab/roles/nodefacts"
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

// What the node's files say reaches the state whichever way a manifest
// carries its flags: kubeadm's in command, a hand-built etcd's in args
// (read from command only, this etcd looked unconfigured and its old
// address went unnoticed).
func TestSetLive(t *testing.T) {
	live := nodefacts.Live{
		Files: map[string][]byte{
			nodefacts.Manifest(nodefacts.KubeAPIServer): []byte(`spec:
  containers:
  - name: kube-apiserver
    command: [kube-apiserver, --advertise-address=10.0.0.120, --encryption-provider-config=/etc/kubernetes/encryption/config.yaml]
`),
			nodefacts.Manifest(nodefacts.Etcd): []byte(`spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.5-0
    args: [--name=cp-1, "--listen-peer-urls=https://10.0.0.120:2380,https://127.0.0.1:2380"]
`),
			nodefacts.KubeletFlagsEnv: []byte(`KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.120"` + "\n"),
		},
		Kubeconfigs: map[string]string{
			nodefacts.KubeletConf: "https://10.0.0.120:6443",
			nodefacts.AdminConf:   "https://10.0.0.100:6443",
		},
	}
	in := ControlPlaneAddressArgs{Address: "10.0.0.140", ComponentArgs: map[string][]string{
		"kube-apiserver": {"encryption-provider-config=/etc/kubernetes/encryption/config.yaml"},
		"kube-scheduler": {"bind-address=127.0.0.1"},
	}}
	st := ControlPlaneAddressState{ControlPlaneAddressArgs: in}
	setLive(&st, live)
	if st.LiveAdvertise != "10.0.0.120" || st.LiveEtcdPeer != "10.0.0.120" || st.LiveNodeIP != "10.0.0.120" {
		t.Errorf("advertise %q etcd peer %q node IP %q", st.LiveAdvertise, st.LiveEtcdPeer, st.LiveNodeIP)
	}
	if want := map[string]string{"kubelet.conf": "10.0.0.120"}; !maps.Equal(st.LiveKubeconfig, want) {
		t.Errorf("kubeconfigs %v, want %v (admin.conf points at the endpoint)", st.LiveKubeconfig, want)
	}
	if st.LiveArgs["kube-apiserver/encryption-provider-config"] != "/etc/kubernetes/encryption/config.yaml" || hasPod(st.LiveArgs, "kube-scheduler") {
		t.Errorf("component flags %v", st.LiveArgs)
	}
	if want := map[string]string{"apiserver.crt": "", "etcd/server.crt": "", "etcd/peer.crt": ""}; !maps.Equal(st.LiveSANs, want) {
		t.Errorf("SANs %v, want every certificate missing", st.LiveSANs)
	}
	d := driftOf(in, st)
	if !d.address || !slices.Contains(d.problems, "etcd listens on 10.0.0.120") {
		t.Errorf("a moved node whose etcd has its flags in args: %+v", d)
	}
}
