package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// readOutcome is what a refresh of r records when its node cannot be read:
// "last" (the last known state stands), "unknown" (another state, which
// the step re-checks), or "error" (the refresh fails).
func readOutcome[I, O any](ctx context.Context, r infer.CustomRead[I, O], in I, last O) string {
	resp, err := r.Read(ctx, infer.ReadRequest[I, O]{ID: "id", Inputs: in, State: last})
	switch {
	case err != nil:
		return "error"
	case reflect.DeepEqual(resp.State, last):
		return "last"
	}
	return "unknown"
}

// Every resource's read policy, as the refresh sees it: one row per
// resource, one column per way its nodes can fail to be read. The rows
// that differ from keepOrRecheck say why in their policy's comment.
func TestEveryResourceReadPolicy(t *testing.T) {
	type row struct {
		resource                            string
		read                                func(ctx context.Context, l *fakeLab) string
		unreachable, refused, hostKeyChange string
	}
	rows := []row{
		{"Host", func(ctx context.Context, l *fakeLab) string {
			in := HostArgs{Connection: l.conn("cp-1"), Address: "10.0.0.11"}
			return readOutcome(ctx, Host{}, in, HostState{HostArgs: in, Hostname: "cp-1", Addresses: []string{"10.0.0.11"}, HostKey: "SHA256:a", ConvergedHostKey: "SHA256:a"})
		}, "last", "last", "error"},
		{"File", func(ctx context.Context, l *fakeLab) string {
			in := sysctlFile(l.conn("cp-1"))
			return readOutcome(ctx, File{}, in, FileState{FileArgs: in, Sha256: sum(in.Content), LiveMode: in.Mode})
		}, "last", "unknown", "last"},
		{"Service", func(ctx context.Context, l *fakeLab) string {
			in := ServiceArgs{Connection: l.conn("cp-1"), Name: "kubelet"}
			return readOutcome(ctx, Service{}, in, ServiceState{ServiceArgs: in, Enabled: true, Active: true})
		}, "last", "unknown", "last"},
		{"Package", func(ctx context.Context, l *fakeLab) string {
			in := PackageArgs{Connection: l.conn("cp-1"), Names: []string{"keepalived"}, Version: "1:2.2.7-1"}
			return readOutcome(ctx, Package{}, in, PackageState{PackageArgs: in, Versions: map[string]string{"keepalived": "1:2.2.7-1"}, Status: PackageInstalled})
		}, "last", "unknown", "last"},
		{"KubeadmInit", func(ctx context.Context, l *fakeLab) string {
			in := KubeadmInitArgs{Connection: l.conn("cp-1"), Peers: []Connection{l.conn("cp-2")}, ConfigSha: "a"}
			return readOutcome(ctx, KubeadmInit{}, in, KubeadmInitState{KubeadmInitArgs: in, Initialized: true, AdminKubeconfig: "apiVersion: v1", ClusterUID: "u"})
		}, "last", "unknown", "last"},
		{"KubeadmJoin", func(ctx context.Context, l *fakeLab) string {
			in := KubeadmJoinArgs{Connection: l.conn("cp-1"), Via: l.conn("cp-2"), ControlPlane: true}
			return readOutcome(ctx, KubeadmJoin{}, in, KubeadmJoinState{KubeadmJoinArgs: in, Joined: true})
		}, "last", "unknown", "last"},
		{"NodeMeta", func(ctx context.Context, l *fakeLab) string {
			in := NodeMetaArgs{Via: l.conn("cp-1"), Node: "gpu-1", Labels: map[string]string{"a": "1"}}
			return readOutcome(ctx, NodeMeta{}, in, NodeMetaState{NodeMetaArgs: in, LiveLabels: map[string]string{"a": "1"}})
		}, "last", "unknown", "last"},
		{"Manifest", func(ctx context.Context, l *fakeLab) string {
			in := ManifestArgs{Via: l.conn("cp-1"), Kind: "RuntimeClass", Name: "nvidia", Content: "x"}
			return readOutcome(ctx, Manifest{}, in, ManifestState{ManifestArgs: in, Exists: true})
		}, "last", "unknown", "last"},
		{"EtcdMembers", func(ctx context.Context, l *fakeLab) string {
			in := EtcdMembersArgs{Via: []Connection{l.conn("cp-1"), l.conn("cp-2")}, Members: []EtcdMember{{Name: "cp-1", PeerURL: "https://10.0.0.11:2380"}}}
			return readOutcome(ctx, EtcdMembers{}, in, EtcdMembersState{EtcdMembersArgs: in, Live: in.Members})
		}, "last", "last", "last"},
		{"Dataplane", func(ctx context.Context, l *fakeLab) string {
			in := DataplaneArgs{Via: l.conn("cp-1"), Nodes: []Connection{l.conn("cp-1")}, Replacement: "none"}
			return readOutcome(ctx, Dataplane{}, in, DataplaneState{DataplaneArgs: in, KubeProxy: true, ReleasePresent: true})
		}, "last", "last", "last"},
		{"ControlPlaneAddress", func(ctx context.Context, l *fakeLab) string {
			in := ControlPlaneAddressArgs{Connection: l.conn("cp-1"), Address: "10.0.0.11"}
			return readOutcome(ctx, ControlPlaneAddress{}, in, ControlPlaneAddressState{ControlPlaneAddressArgs: in, LiveAdvertise: "10.0.0.11"})
		}, "last", "last", "last"},
		{"ControlPlaneRevival", func(ctx context.Context, l *fakeLab) string {
			in := ControlPlaneRevivalArgs{Nodes: []Connection{l.conn("cp-1"), l.conn("cp-2")}}
			return readOutcome(ctx, ControlPlaneRevival{}, in, ControlPlaneRevivalState{ControlPlaneRevivalArgs: in,
				LiveExpiry: map[string]map[string]string{"cp-1": {"apiserver.crt": "2027-01-10T08:00:00Z"}, "cp-2": {"apiserver.crt": "2027-01-10T08:00:00Z"}}})
		}, "last", "last", "last"},
	}
	if len(rows) != 12 {
		t.Fatalf("%d resources in the table, the provider has 12", len(rows))
	}
	for _, r := range rows {
		for _, col := range []struct {
			name string
			err  func(node string) error
			want string
		}{
			{"unreachable", unreachableErr, r.unreachable},
			{"key refused", keyRefusedErr, r.refused},
			{"host key changed", hostKeyChangedErr, r.hostKeyChange},
		} {
			lab := newFakeLab(t)
			for _, n := range []string{"cp-1", "cp-2"} {
				lab.node(n).dialErr = col.err(n)
			}
			if got := r.read(lab.ctx(), lab); got != col.want {
				t.Errorf("%s, %s: %s, want %s", r.resource, col.name, got, col.want)
			}
		}
	}
}

// The bootstrap looks for the cluster on every node: found on a peer, it
// is the cluster, whatever the bootstrap node says.
func TestClusterFoundOnAPeer(t *testing.T) {
	lab := newFakeLab(t)
	lab.node("cp-1").dialErr = keyRefusedErr("cp-1")
	cp2 := lab.node("cp-2")
	cp2.onScript("cluster/peer", nodefacts.StateSetUp+"\n", 0)
	cp2.onScript("cluster/uid", "uid-2", 0)
	cp2.put(adminConf, "apiVersion: v1\nkind: Config\n", 0o600)
	in := KubeadmInitArgs{Connection: lab.conn("cp-1"), Peers: []Connection{lab.conn("cp-2")}}
	st := refresh(t, lab.ctx(), KubeadmInit{}, in, KubeadmInitState{KubeadmInitArgs: in})
	if !st.Initialized || st.ClusterUID != "uid-2" || !strings.Contains(st.AdminKubeconfig, "kind: Config") {
		t.Errorf("found on cp-2: %+v", st)
	}
}

// A node that runs kubeadm's state is reset only with consent for it; one
// that cannot be reached is forgotten only with it.
func TestJoinDeleteNeedsConsent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   string
		dialErr error
	}{
		{"a joined worker", nodefacts.StateSetUp, nil},
		{"a half-done join", nodefacts.StatePartial, nil},
		{"an unreachable worker", "", unreachableErr("gpu-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lab := newFakeLab(t)
			n := lab.node("gpu-1")
			n.dialErr = tc.dialErr
			st := KubeadmJoinState{KubeadmJoinArgs: KubeadmJoinArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1")}, Joined: true}
			n.onScript("nodefacts/state", tc.state+"\n", 0)
			_, err := (KubeadmJoin{}).Delete(lab.ctx(), infer.DeleteRequest[KubeadmJoinState]{ID: "id", State: st})
			if err == nil || !strings.Contains(err.Error(), RefusedMarker) || !strings.Contains(err.Error(), "--allow-destroy gpu-1") {
				t.Errorf("delete: %v", err)
			}
			if m := n.mutations(); len(m) > 0 || lab.node("cp-1").dials > 0 {
				t.Errorf("refused, yet did %v and asked the cluster %d times", m, lab.node("cp-1").dials)
			}
		})
	}
}

// A consented removal stops the node's kubelet once drained and before its
// Node is deleted, so no kubelet registers it again; the reset comes last.
func TestJoinDeleteStopsTheKubeletBeforeTheNode(t *testing.T) {
	lab := newFakeLab(t)
	lab.config().allowDestroy = "gpu-1"
	n, cp := lab.node("gpu-1"), lab.node("cp-1")
	st := KubeadmJoinState{KubeadmJoinArgs: KubeadmJoinArgs{Connection: lab.conn("gpu-1"), Via: lab.conn("cp-1")}, Joined: true}
	n.onScript("nodefacts/state", nodefacts.StateSetUp+"\n", 0)
	n.onScript("leave/stop-kubelet", "", 0)
	n.onScript("kubeadm/reset", "", 0)
	cp.onScript("cluster/readyz", "ok", 0)
	cp.onScript("leave/drain", "", 0)
	cp.onScript("kubectl/delete-node", "", 0)
	if _, err := (KubeadmJoin{}).Delete(lab.ctx(), infer.DeleteRequest[KubeadmJoinState]{ID: "id", State: st}); err != nil {
		t.Fatal(err)
	}
	at := func(node *fakeNode, script string) int {
		for _, e := range node.events {
			if name, _ := scripts.NameOf(e.cmd); name == script {
				return e.seq
			}
		}
		t.Fatalf("%s never ran %s", node.name, script)
		return 0
	}
	drain, stop, del, reset := at(cp, "leave/drain"), at(n, "leave/stop-kubelet"), at(cp, "kubectl/delete-node"), at(n, "kubeadm/reset")
	if !(drain < stop && stop < del && del < reset) {
		t.Errorf("order: drain %d, kubelet stopped %d, Node deleted %d, reset %d", drain, stop, del, reset)
	}
}
