package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
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

// TestUpgradeInTheLab is issue 13 end to end. Nodes that start without
// kubeadm, kubelet or kubectl get them from the lab's signed apt
// repository through the real apt and dpkg, at v1.34.4 and held, and the
// cluster builds on them. A downgrade, a skipped minor, and v1.35.4 with
// a control-plane node off, are refused before anything changes. Then
// v1.35.4 is declared: preview lists the plan in kubeadm's order; up is
// killed while cp-2's kubeadm upgrade node runs, and the next goes on (no
// second apply) until a PodDisruptionBudget holds gpu-4's drain past its timeout,
// and stops naming the pod; the budget lifted, the next up resumes. Afterwards every Node's kubelet, every control-plane node's
// apiserver and kubeadm-config say v1.35.4, the packages are held there,
// etcd's members are the same, the witness written before is there, and
// the next up changes nothing and runs no mutating command.
func TestUpgradeInTheLab(t *testing.T) {
	needE2E(t)
	from, to := tools.KubernetesVersion, tools.UpgradeKubernetesVersion
	for _, b := range []string{"kubeadm", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(tools.KubernetesDir(to), b)); err != nil {
			toolstest.Missing(t, to+" "+b+" is not built: KUBE_VERSION="+to+" infra/tools/build-kube.sh")
		}
	}
	e := newE2EWith(t, upgradable)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	e.freshMachines(ctx)
	s := e.open(ctx, e.invPath)
	if !s.Inv.Cluster.Packages.Manage {
		t.Fatal("the inventory does not manage packages")
	}
	e.up(ctx, s)
	e.packagesHeld(ctx, from)
	e.node(ctx, "cp-1", labKubectl+"-n default create configmap upgrade-witness --from-literal=written=before-the-upgrade")
	members := e.node(ctx, "cp-1", etcdctlMembers)

	// Refused before anything changes: a downgrade, and a control-plane
	// node that is off (unless left out explicitly).
	e.mutating()
	refused := func(inv, what string, says ...string) {
		t.Helper()
		// No refresh: the upgrade reads the nodes itself.
		_, err := e.open(ctx, inv).Up(ctx, false)
		if err == nil {
			t.Fatalf("%s: the up went ahead", what)
		}
		for _, w := range says {
			if !strings.Contains(err.Error()+e.log.String(), w) {
				t.Errorf("%s: the refusal does not say %q: %v", what, w, err)
			}
		}
		if m := e.mutating(); len(m) > 0 {
			t.Errorf("%s: refused, yet it ran mutating commands: %v", what, m)
		}
	}
	refused(e.inventory("downgrade", declareVersion(from, "v1.34.2")), "a downgrade", "does not downgrade")
	// A skipped minor (v1.34 -> v1.36) is refused by the inventory's own
	// check, before any node is read (the plan's refusal is unit-tested).
	if _, err := Open(ctx, e.options(e.inventory("skip", declareVersion(from, "v1.36.0")))); err == nil || !strings.Contains(err.Error(), "cluster.kubernetesVersion") {
		t.Errorf("v1.36.0 declared: %v, want the inventory refused naming cluster.kubernetesVersion", err)
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("a skipped minor: refused, yet it ran mutating commands: %v", m)
	}
	if err := e.lab.PowerOff("cp-3"); err != nil {
		t.Fatal(err)
	}
	refused(e.inventory("cp-3-off", declareVersion(from, to)), "cp-3 off", "cp-3", "--upgrade-without cp-3")
	if err := e.lab.PowerOn(ctx, "cp-3"); err != nil {
		t.Fatal(err)
	}

	// A pod on gpu-4 that a PodDisruptionBudget forbids to evict.
	hold := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"hold","namespace":"default"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"hold"}},` +
		`"template":{"metadata":{"labels":{"app":"hold"}},"spec":{"nodeSelector":{"kubernetes.io/hostname":"gpu-4"},"tolerations":[{"operator":"Exists"}],"containers":[{"name":"hold","image":"registry.k8s.io/pause:3.10.1"}]}}}}`
	e.node(ctx, "cp-1", "echo '"+hold+"' | "+labKubectl+"apply -f -")
	e.node(ctx, "cp-1", labKubectl+"-n default create poddisruptionbudget hold --selector=app=hold --max-unavailable=0")
	if out, err := e.lab.Run(ctx, "cp-1", labKubectl+"-n default rollout status deployment/hold --timeout=120s"); err != nil {
		t.Fatalf("the pod to hold gpu-4's drain does not run: %v\n%s\n%s", err, out, e.node(ctx, "cp-1", labKubectl+"-n default describe pods -l app=hold"))
	}

	bumped := e.inventory("upgraded", func(s string) string {
		return strings.Replace(declareVersion(from, to)(s), "  allowCgroupV1: true\n", "  allowCgroupV1: true\n  upgrade: {drainTimeout: 20s, maxUnavailable: 3}\n", 1)
	})
	s = e.open(ctx, bumped)
	changes, err := s.PreviewChanges(ctx, true)
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	i := slices.IndexFunc(changes, func(c Change) bool { return c.Type == "homelab:index:KubernetesUpgrade" })
	if i < 0 {
		t.Fatalf("the preview plans no upgrade: %v", changes)
	}
	said := changes[i].String()
	t.Logf("preview: %s", said)
	for _, want := range []string{"UPGRADES Kubernetes " + from + " -> " + to, "1. cp-1: kubeadm " + to + ", then kubeadm upgrade apply " + to,
		"2. cp-2: kubeadm " + to + ", then kubeadm upgrade node", "4. cp-1: drain, kubelet and kubectl", "7. gpu-1, gpu-2, gpu-3: drain", "8. gpu-4: drain"} {
		if !strings.Contains(said, want) {
			t.Errorf("the preview does not say %q", want)
		}
	}

	// The upgrade stops at gpu-4's drain and says why. The API through
	// the endpoint is written to every 200 ms meanwhile (figures, not
	// assertions: this machine is shared).
	sample := e.sampleWrites(ctx, s)
	start := time.Now()
	// Killed (SIGKILL, as a power cut of the workstation) once cp-1 is
	// done and cp-2's kubeadm upgrade node runs (detached, it goes on):
	// the next up waits for it, then goes on from what the nodes run,
	// without a second apply.
	err = e.interruptWhen(ctx, s, "cp-2", "test -e /var/lib/homelab/runs/kubeadm-upgrade/pid")
	t.Logf("figures: the up killed while cp-2's kubeadm upgrade node ran, %s in: %v", time.Since(start).Round(time.Second), err)
	if v := nodefacts.ParseVersions(e.node(ctx, "cp-1", nodeprobes.Versions().String())); v.ControlPlane() != to {
		t.Fatalf("cp-1 runs %v after its apply", v.Components)
	}
	e.mutating()
	_, err = s.Up(ctx, true)
	t.Logf("figures: the upgrade's ups, to gpu-4's drain, took %s; writes through the endpoint: %s", time.Since(start).Round(time.Second), sample())
	for _, m := range e.mutating() {
		if strings.Contains(m, "kubeadm upgrade apply") {
			t.Errorf("the up after the kill ran the apply again: %s", m)
		}
	}
	if err == nil || !strings.Contains(err.Error()+e.log.String(), "default/hold-") || !strings.Contains(err.Error()+e.log.String(), "stays cordoned") {
		t.Fatalf("the drain past its timeout did not stop the upgrade naming the pod: %v", err)
	}
	if v := nodefacts.ParseVersions(e.node(ctx, "gpu-4", nodeprobes.Versions().String())); v.Kubelet != from {
		t.Errorf("gpu-4 upgraded although its drain failed: %+v", v)
	}
	if u := e.node(ctx, "cp-1", labKubectl+"get node gpu-4 -o jsonpath='{.spec.unschedulable}'"); u != "true" {
		t.Errorf("gpu-4 is not left cordoned: %q", u)
	}

	// The budget lifted, the next up resumes: no second apply.
	e.node(ctx, "cp-1", labKubectl+"-n default delete poddisruptionbudget hold")
	e.mutating()
	sample = e.sampleWrites(ctx, s)
	start = time.Now()
	e.up(ctx, s)
	t.Logf("figures: the resumed up took %s; writes through the endpoint: %s", time.Since(start).Round(time.Second), sample())
	for _, m := range e.mutating() {
		if strings.Contains(m, "kubeadm upgrade apply") || strings.Contains(m, "kubeadm upgrade node") && !strings.Contains(m, "gpu-4") {
			t.Errorf("the resumed up ran again: %s", m)
		}
	}

	for _, n := range labNodes {
		v := nodefacts.ParseVersions(e.node(ctx, n, nodeprobes.Versions().String()))
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
	e.packagesHeld(ctx, to)
	e.verify(ctx, s)
	e.mutating()
	e.noChanges(ctx, s, "the up after the upgrade")
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("the up after the upgrade ran mutating commands: %v", m)
	}
}

// writes is what sampleWrites saw: writes through the endpoint (an
// apiserver that answers and an etcd that commits) that succeeded and
// failed, and the longest time between two successful ones.
type writes struct {
	Written, Failed int
	Longest         time.Duration
}

func (w writes) String() string {
	return fmt.Sprintf("%d written, %d failed, longest time without a write %s", w.Written, w.Failed, w.Longest.Round(10*time.Millisecond))
}

// sampleWrites writes a ConfigMap through the endpoint every 200 ms until
// the returned function is called, which returns what it saw.
func (e *e2e) sampleWrites(ctx context.Context, s *Stack) func() writes {
	e.t.Helper()
	outs, err := s.Outputs(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kc))
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Dial, cfg.Timeout = e.lab.Dial, time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("default")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-sampler"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan writes)
	go func() {
		var w writes
		last := time.Now()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				w.Longest = max(w.Longest, time.Since(last))
				done <- w
				return
			case <-tick.C:
			}
			cm.Data = map[string]string{"n": strconv.Itoa(w.Written + w.Failed)}
			wctx, wcancel := context.WithTimeout(sctx, time.Second)
			_, err := cms.Update(wctx, cm, metav1.UpdateOptions{})
			wcancel()
			if err != nil {
				if sctx.Err() == nil {
					w.Failed++
				}
				continue
			}
			w.Written++
			w.Longest, last = max(w.Longest, time.Since(last)), time.Now()
		}
	}()
	return func() writes {
		cancel()
		return <-done
	}
}

// etcdctlMembers prints the member IDs and names, sorted.
const etcdctlMembers = "etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt " +
	"--cert=/etc/kubernetes/pki/apiserver-etcd-client.crt --key=/etc/kubernetes/pki/apiserver-etcd-client.key member list 2>/dev/null | cut -d, -f1,3 | sort"
