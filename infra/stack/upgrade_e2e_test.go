package stack

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// upgradable is the packaged lab on this cgroup v1 machine: the
// kubelet and kubeadm from v1.35 refuse cgroup v1 unless told.
func upgradable(inv string) string {
	out := strings.Replace(managePackages(inv), "  kubernetesVersion: ", "  allowCgroupV1: true\n  kubernetesVersion: ", 1)
	if out == inv {
		panic("inventory/lab.yaml has no cluster.kubernetesVersion")
	}
	return out
}

func declareVersion(from, to string) func(string) string {
	return func(s string) string {
		out := strings.Replace(s, "kubernetesVersion: "+from, "kubernetesVersion: "+to, 1)
		if out == s {
			panic("inventory/lab.yaml does not declare " + from)
		}
		return out
	}
}

// TestUpgradeInTheLab is issue 13 end to end: the packaged 7-node lab at
// v1.34.4, a witness written, then v1.35.4 declared: preview lists the
// plan in kubeadm's order, up upgrades, and afterwards every Node's
// kubelet, every control-plane node's apiserver and kubeadm-config say
// v1.35.4, etcd's members are the same, the witness is there, and the
// next up changes nothing.
func TestUpgradeInTheLab(t *testing.T) {
	needE2E(t)
	from, to := tools.KubernetesVersion, tools.UpgradeKubernetesVersion
	for _, b := range []string{"kubeadm", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(tools.KubernetesDir(to), b)); err != nil {
			toolstestMissing(t, to+" "+b+" is not built: KUBE_VERSION="+to+" infra/tools/build-kube.sh")
		}
	}
	e := newE2EWith(t, upgradable)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	s := e.open(ctx, e.invPath)
	e.up(ctx, s)
	e.node(ctx, "cp-1", labKubectl+"-n default create configmap upgrade-witness --from-literal=written=before-the-upgrade")
	members := e.node(ctx, "cp-1", etcdctlMembers)

	bumped := e.inventory("upgraded", declareVersion(from, to))
	s = e.open(ctx, bumped)
	mark := e.log.Len()
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	said := e.log.String()[mark:]
	for _, want := range []string{"UPGRADES Kubernetes " + from + " -> " + to, "1. cp-1: kubeadm " + to + ", then kubeadm upgrade apply " + to,
		"2. cp-2: kubeadm " + to + ", then kubeadm upgrade node", "4. cp-1: drain, kubelet and kubectl", "10. gpu-4: drain"} {
		if !strings.Contains(said, want) {
			t.Errorf("the preview does not say %q:\n%s", want, tail(said, 40))
		}
	}
	if !slices.ContainsFunc(changes, func(c Change) bool { return c.Type == "homelab:index:KubernetesUpgrade" }) {
		t.Errorf("the preview plans no upgrade: %v", changes)
	}

	start := time.Now()
	e.up(ctx, s)
	t.Logf("figures: the upgrade's up took %s", time.Since(start).Round(time.Second))

	for _, n := range labNodes {
		v := nodefacts.ParseVersions(e.node(ctx, n, nodefacts.VersionsScript))
		if v.Kubelet != to {
			t.Errorf("%s: kubelet %s after the upgrade", n, v.Kubelet)
		}
		if strings.HasPrefix(n, "cp-") && v.ControlPlane() != to {
			t.Errorf("%s: control plane %v after the upgrade", n, v.Components)
		}
	}
	nodes := e.node(ctx, "cp-1", labKubectl+` get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.nodeInfo.kubeletVersion} {end}'`)
	if strings.Count(nodes, "="+to) != len(labNodes) {
		t.Errorf("Nodes after the upgrade: %s", nodes)
	}
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		addr := strings.TrimSpace(e.node(ctx, n, "hostname -I | cut -d' ' -f1"))
		if v := e.node(ctx, n, labKubectl+"--server https://"+addr+":6443 get --raw /version"); !strings.Contains(v, `"gitVersion": "`+to+`"`) {
			t.Errorf("%s's apiserver answers /version with %s", n, v)
		}
	}
	if cc := e.node(ctx, "cp-1", labKubectl+"-n kube-system get configmap kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'"); nodefacts.ClusterConfigVersion(cc) != to {
		t.Errorf("kubeadm-config says %q", nodefacts.ClusterConfigVersion(cc))
	}
	if after := e.node(ctx, "cp-1", etcdctlMembers); after != members {
		t.Errorf("etcd's members changed:\nbefore %s\nafter  %s", members, after)
	}
	if w := e.node(ctx, "cp-1", labKubectl+"-n default get configmap upgrade-witness -o jsonpath='{.data.written}'"); w != "before-the-upgrade" {
		t.Errorf("the witness written before the upgrade reads %q", w)
	}
	if snaps := e.node(ctx, "cp-1", "ls /var/lib/homelab/etcd-snapshots/"); !strings.Contains(snaps, "before-upgrade-"+to) {
		t.Errorf("no etcd snapshot kept before the upgrade: %s", snaps)
	}
	e.verify(ctx, s)
	e.mutating()
	e.noChanges(ctx, s, "the up after the upgrade")
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("the up after the upgrade ran mutating commands: %v", m)
	}
}

// etcdctlMembers prints the member IDs and names, sorted.
const etcdctlMembers = "ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt " +
	"--cert=/etc/kubernetes/pki/apiserver-etcd-client.crt --key=/etc/kubernetes/pki/apiserver-etcd-client.key member list | cut -d, -f1,3 | sort"

func toolstestMissing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv(toolstest.EnvRequire) == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}
