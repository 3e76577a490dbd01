package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// soloNodes is a homelab with one control-plane node: its etcd data is
// the cluster's only copy.
const soloNodes = `nodes:
  - {name: solo, role: control-plane, address: 10.77.0.120, mac: "52:54:00:4d:00:78", interface: eth0}
  - {name: w1, role: worker, address: 10.77.0.130, mac: "52:54:00:4d:00:82", interface: eth0}
`

func soloInventory(s string) string {
	return withNodes(strings.Replace(s, "layout: vip ", "layout: single-ip ", 1), soloNodes, "solo")
}

// soloRealInventory is soloInventory for real nodes, which are declared
// without MACs (withoutMACs).
func soloRealInventory(s string) string { return withoutMACs(soloInventory(s)) }

// checkOnlyCopy is issue 36's first item end to end, on the solo
// cluster TestRuntimeCgroupDriverInTheLab leaves (one control-plane node:
// its etcd data is the cluster's only copy), as the inventory at inv
// declares it: each ordinary way of leaving that node without one of
// kubeadm's files (admin.conf deleted as a hardening step, the static pod
// manifests moved aside as kubeadm's restore guide does, a restore
// interrupted with them set aside) ends, after one up, with the cluster
// back and its data kept: the node is repaired with kubeadm's init
// phases, never reset, and no command deletes etcd's data. The nodes are
// real: the real kubelet stops and starts the static pods. It ran on a
// build of its own until 7 December 2026 (TestOnlyCopyIsKeptInTheLab).
func (e *e2e) checkOnlyCopy(ctx context.Context, t *testing.T, inv string) {
	t.Helper()
	s := e.open(ctx, inv)
	const kubectl = "kubectl --kubeconfig " + nodefacts.AdminConf
	e.node(ctx, "solo", kubectl+" create configmap only-copy --from-literal=written=before")
	e.mutating()

	for _, tc := range []struct{ name, breakIt string }{
		{"admin.conf deleted", "rm " + nodefacts.AdminConf},
		{"manifests moved aside", "mkdir -p /root/manifests-aside && mv " + nodefacts.ManifestsDir + "/*.yaml /root/manifests-aside/"},
		{"a restore interrupted", "mkdir -p " + nodefacts.RestoreAsideDir + " && mv " + nodefacts.ManifestsDir + "/*.yaml " + nodefacts.RestoreAsideDir + "/"},
	} {
		t.Run("only copy kept/"+tc.name, func(sub *testing.T) {
			// The helpers fail the subtest that calls them.
			e.t = sub
			defer func() { e.t = t }()
			t := sub
			e.node(ctx, "solo", tc.breakIt)
			e.up(ctx, e.open(ctx, inv))
			for _, c := range e.mutating() {
				// By the scripts' names, and by what they would do whatever
				// script did it (paths are quoted in scripts).
				if strings.Contains(c, scripts.HeaderPrefix+"kubeadm/reset") || strings.Contains(c, "kubeadm reset") ||
					strings.Contains(c, nodefacts.EtcdAsideDir) || strings.Contains(c, nodefacts.EtcdMemberDir) || strings.Contains(c, "'"+nodefacts.EtcdDataDir+"'") {
					t.Errorf("up ran a command that takes etcd's data: %s", c)
				}
			}
			if got := strings.TrimSpace(e.node(ctx, "solo", kubectl+" get configmap only-copy -o jsonpath={.data.written}")); got != "before" {
				t.Errorf("the cluster's data after the up: only-copy written=%q, want before", got)
			}
			e.verify(ctx, s)
		})
	}
}
