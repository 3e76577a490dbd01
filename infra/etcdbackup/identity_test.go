package etcdbackup

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// The client CA is read from the ConfigMap as the apiserver stores it
// (protobuf in runtime.Unknown, or JSON); an encrypted one is said so.
func TestClientCA(t *testing.T) {
	cm := corev1.ConfigMap{Data: map[string]string{"client-ca-file": "-----BEGIN CERTIFICATE-----\nabc\n"}}
	raw, err := cm.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Raw: raw, ContentType: "application/vnd.kubernetes.protobuf"}
	wrapped, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if ca, enc := clientCA(append([]byte("k8s\x00"), wrapped...)); string(ca) != cm.Data["client-ca-file"] || enc {
		t.Errorf("protobuf: %q %v", ca, enc)
	}
	if ca, _ := clientCA([]byte(`{"data":{"client-ca-file":"pem"}}`)); string(ca) != "pem" {
		t.Errorf("json: %q", ca)
	}
	if ca, enc := clientCA([]byte("k8s:enc:secretbox:v1:key:...")); ca != nil || !enc {
		t.Errorf("encrypted: %q %v", ca, enc)
	}
	if ca, enc := clientCA([]byte("garbage")); ca != nil || enc {
		t.Errorf("garbage: %q %v", ca, enc)
	}
}

func TestPickTarget(t *testing.T) {
	st := func(name string, member bool, applied uint64, answers bool) *nodeState {
		s := &nodeState{node: &node{}, files: map[string]bool{}}
		s.Name = name
		if member {
			s.manifest, s.files["/etc/kubernetes/.homelab-join-complete"] = []byte("x"), true
		}
		if answers {
			s.health = &Health{AppliedIndex: applied}
		}
		return s
	}
	states := []*nodeState{st("cp-1", true, 0, false), st("cp-2", true, 90, true), st("cp-3", true, 120, true), st("cp-4", false, 0, false)}
	if got, err := pickTarget(states, RestoreOptions{}); err != nil || got.Name != "cp-3" {
		t.Errorf("most up to date: %v %v", got, err)
	}
	if got, err := pickTarget(states, RestoreOptions{Node: "cp-1"}); err != nil || got.Name != "cp-1" {
		t.Errorf("named: %v %v", got, err)
	}
	for _, o := range []RestoreOptions{{Node: "cp-4"}, {FromData: "cp-9"}} {
		if _, err := pickTarget(states, o); err == nil {
			t.Errorf("%+v: a blank or unreachable node was picked", o)
		}
	}
	if _, err := pickTarget(states[3:], RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "no reachable control-plane node") {
		t.Errorf("only blank nodes: %v", err)
	}
}

// A restore seeds the bootstrap node only when every reachable
// control-plane node is blank: any trace of a control plane elsewhere is
// a node to restore onto (or to refuse), and --from-data needs data.
func TestSeedTarget(t *testing.T) {
	inv := &inventory.Inventory{Nodes: []inventory.Node{{Name: "cp-1", Role: "control-plane"}, {Name: "cp-2", Role: "control-plane"}, {Name: "cp-3", Role: "control-plane"}}}
	tg := Target{Inventory: inv}
	st := func(name string, files ...string) *nodeState {
		s := &nodeState{node: &node{Node: inventory.Node{Name: name, Role: "control-plane"}}, files: map[string]bool{}}
		for _, f := range files {
			s.files[f] = true
		}
		return s
	}
	blank := []*nodeState{st("cp-1"), st("cp-2"), st("cp-3")}
	for _, c := range []struct {
		name   string
		states []*nodeState
		o      RestoreOptions
		want   string
	}{
		{"every node blank", blank, RestoreOptions{From: "s.db"}, "cp-1"},
		{"the bootstrap node unreachable", blank[1:], RestoreOptions{From: "s.db"}, ""},
		{"one node with etcd data", []*nodeState{st("cp-1"), st("cp-2", nodefacts.EtcdWALDir), st("cp-3")}, RestoreOptions{From: "s.db"}, ""},
		{"one node marked", []*nodeState{st("cp-1"), st("cp-2"), st("cp-3", nodefacts.JoinMarker)}, RestoreOptions{From: "s.db"}, ""},
		{"--node another blank node", blank, RestoreOptions{From: "s.db", Node: "cp-2"}, ""},
		{"--from-data", blank, RestoreOptions{FromData: "cp-1"}, ""},
	} {
		got := ""
		if s := tg.seedTarget(c.states, c.o); s != nil {
			got = s.Name
		}
		if got != c.want {
			t.Errorf("%s: seeds %q, want %q", c.name, got, c.want)
		}
	}
}
