package stack

import (
	"slices"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	members := func(names ...string) []any {
		var out []any
		for _, n := range names {
			out = append(out, map[string]any{"name": n, "peerURL": "https://x:2380"})
		}
		return out
	}
	for _, c := range []struct {
		change     Change
		old, new   map[string]any
		node, says string // "" says: not destructive
	}{
		{Change{Type: "homelab:index:KubeadmJoin", Name: "cp-3", Op: "delete"}, map[string]any{"controlPlane": true}, nil, "cp-3", "etcd member"},
		{Change{Type: "homelab:index:KubeadmJoin", Name: "gpu-2", Op: "delete"}, map[string]any{"controlPlane": false}, nil, "gpu-2", "pods are evicted"},
		{Change{Type: "homelab:index:KubeadmJoin", Name: "gpu-2", Op: "delete-replaced"}, map[string]any{}, nil, "gpu-2", "resets"},
		{Change{Type: "homelab:index:KubeadmJoin", Name: "gpu-2", Op: "update"}, map[string]any{}, nil, "", ""},
		{Change{Type: "homelab:index:KubeadmJoin", Name: "cp-2", Op: "update", paths: []string{"joined"}},
			map[string]any{"controlPlane": true, "resetRisk": "may reset control-plane node cp-2"}, nil, "cp-2", "may reset"},
		{Change{Type: "homelab:index:KubeadmInit", Name: "homelab", Op: "update", paths: []string{"initialized"}},
			map[string]any{"connection": map[string]any{"node": "cp-1"}, "resetRisk": "resets cp-1, which holds etcd data"}, nil, "cp-1", "etcd data"},
		{Change{Type: "homelab:index:KubeadmInit", Name: "homelab", Op: "update", paths: []string{"initialized"}},
			map[string]any{"connection": map[string]any{"node": "cp-1"}, "partialRepair": "cp-1 was set up"}, nil, "", ""},
		{Change{Type: "homelab:index:EtcdMembers", Name: "etcd", Op: "update"},
			map[string]any{"live": members("cp-1", "cp-2", "cp-3")}, map[string]any{"members": members("cp-1", "cp-2")}, "cp-3", "removes etcd member cp-3"},
		{Change{Type: "homelab:index:EtcdMembers", Name: "etcd", Op: "update"},
			map[string]any{"live": members("cp-1", "cp-2")}, map[string]any{"members": members("cp-1", "cp-2", "cp-3")}, "", ""},
		{Change{Type: "homelab:index:File", Name: "cp-2:/etc/kubernetes/pki/etcd/ca.key", Op: "delete"}, nil, nil, "cp-2", "ca.key"},
		{Change{Type: "homelab:index:File", Name: "cp-2:/etc/kubernetes/encryption/config.yaml", Op: "delete"}, nil, nil, "cp-2", "encryption"},
		{Change{Type: "homelab:index:File", Name: "gpu-1:/etc/netplan/60-homelab.yaml", Op: "delete"}, nil, nil, "", ""},
		{Change{Type: "homelab:index:Dataplane", Name: "dataplane", Op: "delete"}, map[string]any{"cni": "cilium"}, nil, "*", "pod network"},
		{Change{Type: "homelab:index:Dataplane", Name: "dataplane", Op: "delete"}, map[string]any{"cni": "none"}, nil, "", ""},
		{Change{Type: "homelab:index:Dataplane", Name: "dataplane", Op: "update"}, map[string]any{"cni": "cilium"}, nil, "", ""},
	} {
		got := classify(c.change, c.old, c.new)
		if got.Node != c.node || !strings.Contains(got.Destroys, c.says) || (c.says == "") != (got.Destroys == "") {
			t.Errorf("%v: node %q destroys %q, want %q %q", c.change, got.Node, got.Destroys, c.node, c.says)
		}
		if got.Destroys != "" && !strings.Contains(got.String(), "--allow-destroy "+c.node) {
			t.Errorf("%v: %q does not name the consent", c.change, got)
		}
	}
}

func TestRefusals(t *testing.T) {
	err := errString("error: update failed\n  homelab:index:KubeadmJoin (gpu-3):\n    error: DESTRUCTIVE, refused: resetting the node on gpu-3 would reset a node. Nothing was changed for it. If that is ...\n" +
		"    error: DESTRUCTIVE, refused: resetting the node on gpu-3 would reset a node. Nothing was changed for it. If ...\n")
	got := Refusals(err)
	if len(got) != 1 || !strings.Contains(got[0], "gpu-3") || strings.Contains(got[0], "Nothing was changed") {
		t.Errorf("Refusals: %q", got)
	}
	if Refusals(nil) != nil || len(Refusals(errString("error: something else"))) != 0 {
		t.Error("refusals where there are none")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// preview names each certificate a node's ControlPlaneAddress renews and
// the date that makes it due, from the provider's detailed diff.
func TestPreviewNamesRenewals(t *testing.T) {
	c := classify(Change{Type: "homelab:index:ControlPlaneAddress", Name: "cp-2", Op: "update", Keys: []string{"liveExpiry", "sans"},
		paths: []string{"sans", `liveExpiry["etcd/peer.crt"]`, `liveExpiry["admin.conf"]`}},
		map[string]any{"liveExpiry": map[string]any{"admin.conf": "2027-01-10T08:00:00Z", "etcd/peer.crt": "2027-01-11T09:30:00Z", "apiserver.crt": "2027-11-01T00:00:00Z"}}, nil)
	want := []string{"admin.conf (valid until 2027-01-10 08:00 UTC)", "etcd/peer.crt (valid until 2027-01-11 09:30 UTC)"}
	if !slices.Equal(c.Renews, want) || c.Destroys != "" {
		t.Errorf("renews %q, want %q (destroys %q)", c.Renews, want, c.Destroys)
	}
	if !strings.Contains(c.String(), "cp-2 (liveExpiry, sans): renews admin.conf") {
		t.Errorf("preview line %q", c)
	}
}

// preview says what a node's KubeadmJoin repairs, from the state it read.
func TestPreviewNamesKubeletRepair(t *testing.T) {
	why := "kubelet.conf embeds its client certificate (valid until 2027-01-10 08:00 UTC), which nothing rotates: up points it at /var/lib/kubelet/pki/kubelet-client-current.pem"
	c := classify(Change{Type: "homelab:index:KubeadmJoin", Name: "gpu-1", Op: "update", Keys: []string{"liveKubeletClient"}, paths: []string{"liveKubeletClient"}},
		map[string]any{"liveKubeletClient": "embedded", "kubeletClientRepair": why}, nil)
	if c.Repairs != why || c.Destroys != "" || !strings.Contains(c.String(), "gpu-1 (liveKubeletClient): repairs: kubelet.conf embeds") {
		t.Errorf("preview line %q", c)
	}
	// Another change of the join repairs nothing.
	c = classify(Change{Type: "homelab:index:KubeadmJoin", Name: "gpu-1", Op: "update", Keys: []string{"configSha"}, paths: []string{"configSha"}},
		map[string]any{"liveKubeletClient": "embedded", "kubeletClientRepair": why}, nil)
	if c.Repairs != "" {
		t.Errorf("a config change repairs %q", c.Repairs)
	}
}

// preview says the control plane expired and will be revived, naming
// each node and what it renews, from the provider's detailed diff.
func TestPreviewNamesARevival(t *testing.T) {
	c := classify(Change{Type: "homelab:index:ControlPlaneRevival", Name: "control-plane", Op: "update", Keys: []string{"liveExpiry"},
		paths: []string{`liveExpiry["cp-2"]["etcd/peer.crt"]`, `liveExpiry["cp-1"]["apiserver.crt"]`, `liveExpiry["cp-1"]["admin.conf"]`}},
		map[string]any{"liveExpiry": map[string]any{
			"cp-1": map[string]any{"admin.conf": "2027-01-10T08:01:00Z", "apiserver.crt": "2027-01-10T08:00:00Z", "etcd/peer.crt": "2027-01-10T08:00:00Z"},
			"cp-2": map[string]any{"etcd/peer.crt": "2027-01-10T08:03:00Z"},
		}}, nil)
	want := []string{
		"cp-1 renews admin.conf, apiserver.crt (valid until 2027-01-10 08:00 UTC to 2027-01-10 08:01 UTC)",
		"cp-2 renews etcd/peer.crt (valid until 2027-01-10 08:03 UTC)",
	}
	if !slices.Equal(c.Revives, want) || c.Destroys != "" {
		t.Errorf("revives %q, want %q (destroys %q)", c.Revives, want, c.Destroys)
	}
	if s := c.String(); !strings.Contains(s, "expired") || !strings.Contains(s, "REVIVES") || !strings.Contains(s, "cp-2 renews etcd/peer.crt") {
		t.Errorf("preview line %q", s)
	}
	if c := classify(Change{Type: "homelab:index:ControlPlaneRevival", Name: "control-plane", Op: "create"}, nil, nil); len(c.Revives) > 0 {
		t.Errorf("a new revival resource revives %v", c.Revives)
	}
}
