package stack

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/infra/lab/ciliumchart"
	"github.com/homelab-dev/homelab/infra/readiness"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

const labKubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf "

var labNodes = []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}
var gpuNodes = []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"}

// seedKubeRules leaves on every node what kube-proxy would have: iptables
// chains and jumps, an nftables table; plus a rule and a kubelet chain that
// are not kube-proxy's and must stay. On a real node kube-proxy and the
// kubelet made some of them already: only what is missing is added.
func (e *e2e) seedKubeRules(ctx context.Context) {
	for _, n := range labNodes {
		e.node(ctx, n, `set -e
chain() { iptables -t "$1" -S "$2" >/dev/null 2>&1 || iptables -t "$1" -N "$2"; }
rule() { t=$1; shift; iptables -t "$t" -C "$@" 2>/dev/null || iptables -t "$t" -A "$@"; }
chain nat KUBE-SERVICES
rule nat PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
chain nat KUBE-SVC-TESTFIXTURE
rule nat KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 443 -j KUBE-SVC-TESTFIXTURE
chain mangle KUBE-KUBELET-CANARY
rule filter INPUT -s 192.0.2.1/32 -m comment --comment homelab-test-keep -j DROP
nft add table ip kube-proxy`)
	}
}

func (e *e2e) checkKubeRules(ctx context.Context, wantKubeProxy bool) {
	e.t.Helper()
	for _, n := range labNodes {
		out := e.node(ctx, n, "iptables-save; nft list tables")
		has := strings.Contains(out, "KUBE-SVC-TESTFIXTURE") || strings.Contains(out, "KUBE-SERVICES") || strings.Contains(out, "table ip kube-proxy")
		if has != wantKubeProxy {
			e.t.Errorf("%s: kube-proxy's rules present %v, want %v:\n%s", n, has, wantKubeProxy, out)
		}
		if !strings.Contains(out, "homelab-test-keep") || !strings.Contains(out, "KUBE-KUBELET-CANARY") {
			e.t.Errorf("%s: a rule that is not kube-proxy's was removed:\n%s", n, out)
		}
	}
}

func (e *e2e) kubeProxyObjects(ctx context.Context) []string {
	out := e.node(ctx, "cp-1", labKubectl+"-n kube-system get daemonset/kube-proxy configmap/kube-proxy -o name --ignore-not-found")
	return strings.Fields(out)
}

// ciliumConfig is what Cilium's chart derived from the release's values.
func (e *e2e) ciliumConfig(ctx context.Context) map[string]string {
	e.t.Helper()
	out := e.node(ctx, "cp-1", labKubectl+"-n kube-system get configmap "+cilium.ConfigMap+" -o jsonpath='{.data}'")
	v := map[string]string{}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		e.t.Fatalf("cilium-config %q: %v", out, err)
	}
	return v
}

// nodeWatch records, for every Node, when it was first seen NotReady for
// want of a pod network and when first seen Ready.
type nodeWatch struct {
	mu        sync.Mutex
	noNetwork map[string]time.Time
	ready     map[string]time.Time
	message   map[string]string
	stop      chan struct{}
	done      sync.WaitGroup
}

// watchNodes polls the Nodes (through cp-1, once it has an admin.conf)
// every second until end.
func (e *e2e) watchNodes(ctx context.Context) *nodeWatch {
	w := &nodeWatch{noNetwork: map[string]time.Time{}, ready: map[string]time.Time{}, message: map[string]string{}, stop: make(chan struct{})}
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(time.Second):
			}
			out, err := e.lab.Run(ctx, "cp-1", labKubectl+"get nodes -o json 2>/dev/null")
			if err != nil {
				continue
			}
			var l corev1.NodeList
			if json.Unmarshal([]byte(out), &l) != nil {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			for i := range l.Items {
				n := &l.Items[i]
				why := readiness.Of(n)
				switch {
				case why == "":
					if w.ready[n.Name].IsZero() {
						w.ready[n.Name] = now
					}
				case readiness.NoNetwork(why):
					if w.noNetwork[n.Name].IsZero() {
						w.noNetwork[n.Name], w.message[n.Name] = now, why
					}
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// end stops the watch and checks that every node was NotReady with the
// network reason before it was Ready: no Node is Ready before the CNI.
func (w *nodeWatch) end(t testing.TB) {
	t.Helper()
	close(w.stop)
	w.done.Wait()
	for _, n := range labNodes {
		nn, r := w.noNetwork[n], w.ready[n]
		switch {
		case nn.IsZero():
			t.Errorf("%s was never seen NotReady for want of a pod network (first Ready %s)", n, r.Format(time.TimeOnly))
		case r.IsZero():
			t.Errorf("%s was never seen Ready", n)
		case !nn.Before(r):
			t.Errorf("%s was Ready (%s) before it was NotReady without a network (%s)", n, r.Format(time.TimeOnly), nn.Format(time.TimeOnly))
		}
	}
	// The real kubelet lists every reason at once ("[container runtime
	// network not ready: ..., CSINode is not yet initialized]" early on);
	// the network's must be among them.
	if msg := w.message["gpu-1"]; !strings.Contains(msg, "(KubeletNotReady): ") || !strings.Contains(msg, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized") {
		t.Errorf("gpu-1's Ready condition before the CNI: %q", msg)
	}
	t.Logf("figures: first Ready after first NotReady without a network: %s", w.spread())
}

func (w *nodeWatch) spread() string {
	var parts []string
	for _, n := range labNodes {
		if !w.noNetwork[n].IsZero() && !w.ready[n].IsZero() {
			parts = append(parts, n+" "+w.ready[n].Sub(w.noNetwork[n]).Round(time.Second).String())
		}
	}
	return strings.Join(parts, ", ")
}

// checkPodNetwork: the Cilium release installed from the lab's chart in the
// inventory's mode, its agent DaemonSet ready on every node, each node
// holding Cilium's CNI configuration, every Node Ready.
func (e *e2e) checkPodNetwork(ctx context.Context, s *Stack, replacement bool) {
	t := e.t
	t.Helper()
	rel := e.release(ctx, s)
	if !rel.Present || rel.Status != "deployed" || rel.Chart != "cilium-"+ciliumchart.Version || rel.Values["kubeProxyReplacement"] != replacement {
		t.Errorf("release: %+v", rel)
	}
	want := map[string]string{"kube-proxy-replacement": map[bool]string{true: "true", false: "false"}[replacement],
		"k8s-service-host": s.Inv.Cluster.Endpoint.VIP, "k8s-service-port": "6443"}
	got := e.ciliumConfig(ctx)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("cilium-config %s=%q, want %q", k, got[k], v)
		}
	}
	if out := e.node(ctx, "cp-1", labKubectl+"-n kube-system get daemonset "+cilium.AgentDaemonSet+
		" -o jsonpath='{.status.desiredNumberScheduled} {.status.numberReady} {.status.updatedNumberScheduled}'"); out != "7 7 7" {
		t.Errorf("agent DaemonSet desired, ready, updated: %q", out)
	}
	placed := strings.Fields(e.node(ctx, "cp-1", labKubectl+"-n kube-system get pods -l "+cilium.AgentLabel+
		` -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{end}'`))
	if slices.Sort(placed); !slices.Equal(placed, labNodes) {
		t.Errorf("agents on %v", placed)
	}
	for _, n := range labNodes {
		e.node(ctx, n, "test -s /etc/cni/net.d/"+cilium.ConfigFile)
	}
	e.verify(ctx, s)
}

// checkGPU: every GPU worker's containerd runs with the NVIDIA runtime
// up put in its config.toml (and no drop-in), and keeps its label and
// its taint.
func (e *e2e) checkGPU(ctx context.Context) {
	e.t.Helper()
	for _, n := range gpuNodes {
		// The managed runtime (inventory/lab.yaml) holds the NVIDIA
		// runtime in config.toml, as containerd reads it, and no drop-in.
		got := e.node(ctx, n, "containerd config dump | grep -c 'BinaryName = \""+gpu.RuntimeBinary+"\"' || true; test -e "+gpu.ContainerdDropInPath+" && echo drop-in || true")
		if strings.TrimSpace(got) != "1" {
			e.t.Errorf("%s: the nvidia runtime in containerd's configuration (its count, then a drop-in if any): %q", n, got)
		}
		out := e.node(ctx, "cp-1", labKubectl+"get node "+n+` -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.present} {range .spec.taints[*]}{.key}={.value}:{.effect} {end}'`)
		if !strings.HasPrefix(out, "true ") || !strings.Contains(out, kubeadm.GPUTaintKey+"=present:NoSchedule") {
			e.t.Errorf("%s: GPU label and taint: %q", n, out)
		}
	}
	if out := e.node(ctx, "cp-1", labKubectl+"get runtimeclass "+gpu.RuntimeClassName+" -o name"); strings.TrimSpace(out) == "" {
		e.t.Error("RuntimeClass nvidia missing")
	}
}

// checkNoGPUHere: the lab has no GPUs, so the toolkit is skipped on every
// GPU worker with a warning naming it, nothing is installed, doctor warns
// (and still passes), and the device plugin's DaemonSet is placed on the
// GPU workers alone, where its pods do not start: the nvidia runtime's
// binary is not installed, and the runtime says so.
func (e *e2e) checkNoGPUHere(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	for _, n := range gpuNodes {
		if !strings.Contains(e.log.String(), n+": no NVIDIA GPU detected") {
			t.Errorf("the up did not warn that %s has no GPU", n)
		}
	}
	for _, m := range e.mutating() {
		// containerd restarts once a node, on its managed config.toml,
		// by its Service; the toolkit's Package installs and restarts
		// nothing.
		if strings.Contains(m, "apt-get") || strings.Contains(m, "apt-mark") {
			t.Errorf("installed the toolkit without a GPU: %s", m)
		}
	}
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	warned := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Check == "gpu" && f.Status == doctor.Warn {
			warned[f.Where] = true
		}
	}
	for _, n := range labNodes {
		if warned[n] != slices.Contains(gpuNodes, n) {
			t.Errorf("doctor's gpu warning on %s: %v", n, warned[n])
		}
	}
	if !rep.OK() {
		t.Errorf("doctor failed the lab's cluster: %v", rep.Failed())
	}
	ds := gpu.DevicePluginNamespace + " get daemonset " + gpu.DevicePluginName
	pods := labKubectl + "-n " + gpu.DevicePluginNamespace + " get pods -l name=nvidia-device-plugin-ds"
	var placed []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out := e.node(ctx, "cp-1", labKubectl+"-n "+ds+" -o jsonpath='{.status.desiredNumberScheduled}'")
		placed = strings.Fields(e.node(ctx, "cp-1", pods+` -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{end}'`))
		slices.Sort(placed)
		if out == "4" && slices.Equal(placed, gpuNodes) {
			break
		}
	}
	if !slices.Equal(placed, gpuNodes) {
		t.Errorf("device plugin pods on %v, want one on each of %v", placed, gpuNodes)
	}
	// containerd has the nvidia runtime (config.toml), but there was no
	// toolkit to install: the shim fails on the missing binary, as on a
	// real node without a GPU (without the runtime in its configuration,
	// containerd would refuse the handler itself).
	refused := func(events string) int {
		return strings.Count(events, `no runtime for "nvidia" is configured`) + strings.Count(events, "nvidia-container-runtime: no such file")
	}
	var events string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		events = e.node(ctx, "cp-1", labKubectl+"-n "+gpu.DevicePluginNamespace+" get events --field-selector reason=FailedCreatePodSandBox -o jsonpath='{range .items[*]}{.involvedObject.name}: {.message}{\"\\n\"}{end}'")
		if refused(events) >= len(gpuNodes) {
			break
		}
	}
	if refused(events) < len(gpuNodes) {
		all := e.node(ctx, "cp-1", labKubectl+"-n "+gpu.DevicePluginNamespace+" get events --field-selector involvedObject.kind=Pod -o jsonpath='{range .items[*]}{.involvedObject.name} {.reason}: {.message}{\"\\n\"}{end}'")
		t.Errorf("the runtime did not refuse the device plugin's sandboxes for want of the nvidia runtime:\n%s\nevents:\n%s", events, all)
	}
	if ready := e.node(ctx, "cp-1", labKubectl+"-n "+ds+" -o jsonpath='{.status.numberReady}'"); ready != "0" {
		t.Errorf("%s device plugin pods Ready on nodes without the NVIDIA runtime", ready)
	}
}

// checkLostNetwork: a worker's CNI configuration removed and its kubelet
// restarted turns its Node NotReady for want of a pod network; doctor
// names it; preview shows the Dataplane; up restarts the node's Cilium
// agent, whose configuration brings it back.
func (e *e2e) checkLostNetwork(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	e.node(ctx, "gpu-2", "rm /etc/cni/net.d/"+cilium.ConfigFile+" && systemctl restart kubelet")
	var why string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		out := e.node(ctx, "cp-1", labKubectl+"get node gpu-2 -o json")
		var n corev1.Node
		if json.Unmarshal([]byte(out), &n) == nil {
			if why = readiness.Of(&n); readiness.NoNetwork(why) {
				break
			}
		}
	}
	if !readiness.NoNetwork(why) {
		t.Fatalf("gpu-2 without its CNI configuration: %q", why)
	}
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	found := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Where == "gpu-2" && f.Status == doctor.Fail {
			found[f.Check] = (f.Check == "node ready" && readiness.NoNetwork(f.Detail)) || (f.Check == "cni" && strings.Contains(f.Detail, "no network config found"))
		}
	}
	if rep.OK() || !found["node ready"] || !found["cni"] || !causesMention(rep, "gpu-2", "no pod network", cilium.ConfigFile) {
		t.Errorf("doctor on gpu-2 without a pod network: ok=%v rows %v causes %v", rep.OK(), found, rep.Causes)
	}
	if got := e.previewList(ctx, s, true); !slices.Equal(got, []string{"update homelab:index:Dataplane dataplane"}) {
		t.Errorf("preview with gpu-2 NotReady lists %v", got)
	}
	start := time.Now()
	e.up(ctx, s)
	t.Logf("figures: up restoring gpu-2's pod network %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(e.log.String(), "gpu-2: its container runtime has no pod network") {
		t.Error("the up did not say why it restarted gpu-2's agent")
	}
	e.node(ctx, "gpu-2", "test -s /etc/cni/net.d/"+cilium.ConfigFile)
	if rep := e.doctor(ctx, s.Inv, s.Bundle); !rep.OK() {
		t.Errorf("doctor after the repair: %v", rep.Failed())
	}
}

func (e *e2e) previewList(ctx context.Context, s *Stack, refresh bool) []string {
	e.t.Helper()
	changes, err := s.PreviewChanges(ctx, refresh)
	if err != nil {
		e.t.Fatalf("preview: %v", err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Op+" "+c.Type+" "+c.Name)
	}
	return got
}

func (e *e2e) noChanges(ctx context.Context, s *Stack, what string) {
	e.t.Helper()
	for op, n := range e.up(ctx, s) {
		if op != "same" && n > 0 {
			e.t.Errorf("%s: %d %s", what, n, op)
		}
	}
}

// TestDataplaneSwapInTheLab is issues 7 and 19 end to end, with the lab's
// stand-in for Cilium's chart: a fresh cluster with kube-proxy gets Cilium
// as its pod network (no Node Ready before it); a worker that loses its
// CNI configuration is named by doctor and repaired by up; the cluster is
// swapped to Cilium's kube-proxy replacement and back on the live cluster;
// a failing upgrade is rolled back; GPU workers' drop-in, labels and taints
// survive re-applies and hand edits. A cluster built with the replacement
// from the start is TestCertificatesInTheLab's (checkFreshCilium). The
// nodes are real: the agent's pods and kube-proxy's run as containers.
// Then, on the same cluster, the seed's re-addressed cp-1 (checkReaddress).
func TestDataplaneSwapInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2EWith(t, nil, "*")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()

	kubeProxyInv := e.inventory("kube-proxy", withDataplane("none"))
	ciliumInv := e.inventory("cilium", withDataplane("cilium"))

	s := e.open(ctx, kubeProxyInv)
	e.log.Reset()
	w := e.watchNodes(ctx)
	e.up(ctx, s)
	w.end(t)
	if got := e.kubeProxyObjects(ctx); len(got) != 2 {
		t.Fatalf("kube-proxy objects after the first up: %v", got)
	}
	e.checkPodNetwork(ctx, s, false)
	e.checkGPU(ctx)
	e.checkNoGPUHere(ctx, s)
	e.log.Reset()
	e.checkLostNetwork(ctx, s)
	e.seedKubeRules(ctx)
	e.checkKubeRules(ctx, true)

	// The swap, previewed: the init config kubeadm keeps, and the dataplane.
	s = e.open(ctx, ciliumInv)
	e.mutating()
	got := e.previewList(ctx, s, false)
	want := []string{
		"update homelab:index:Dataplane dataplane",
		"update homelab:index:File cp-1:/etc/kubernetes/kubeadm/init.yaml",
		"update homelab:index:File cp-2:/etc/kubernetes/kubeadm/init.yaml",
		"update homelab:index:File cp-3:/etc/kubernetes/kubeadm/init.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("swap preview lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("preview ran mutating commands: %v", m)
	}

	swap := time.Now()
	e.up(ctx, s)
	t.Logf("figures: swap to the replacement took %s", time.Since(swap).Round(time.Millisecond))
	if got := e.kubeProxyObjects(ctx); len(got) != 0 {
		t.Errorf("kube-proxy objects after the swap: %v", got)
	}
	e.checkKubeRules(ctx, false)
	e.checkPodNetwork(ctx, s, true)
	if rel := e.release(ctx, s); rel.Revision != 2 {
		t.Errorf("release after the swap: %+v", rel)
	}
	// The upgrade went through an SSH tunnel, not a command: the command
	// log still shows it.
	if m := e.mutating(); !slices.ContainsFunc(m, func(l string) bool { return strings.Contains(l, ": tunnel helm apply kube-system/cilium") }) {
		t.Errorf("the command log does not show the release's upgrade: %v", m)
	}

	// Re-applying changes nothing, GPU workers included.
	e.mutating()
	e.noChanges(ctx, s, "second up with the replacement")
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("second up ran mutating commands: %v", m)
	}
	e.checkGPU(ctx)

	// Hand edits to a GPU worker's runtime config, label and taint, and
	// kube-proxy's rules coming back on a node, are all repaired.
	e.node(ctx, "gpu-1", "echo '# edited by hand' >> "+containerd.ConfigPath)
	e.node(ctx, "cp-1", labKubectl+"label node gpu-2 "+kubeadm.GPUPresentLabel+"-")
	e.node(ctx, "cp-1", labKubectl+"taint node gpu-3 "+kubeadm.GPUTaintKey+":NoSchedule-")
	e.node(ctx, "gpu-4", "iptables -t nat -N KUBE-SVC-TESTFIXTURE")
	got = e.previewList(ctx, s, true)
	want = []string{
		"update homelab:index:Dataplane dataplane",
		"update homelab:index:File gpu-1:" + containerd.ConfigPath,
		"update homelab:index:NodeMeta gpu-2",
		"update homelab:index:NodeMeta gpu-3",
	}
	if !slices.Equal(got, want) {
		t.Errorf("drift preview lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	e.up(ctx, s)
	e.checkGPU(ctx)
	e.checkKubeRules(ctx, false)

	// Back to kube-proxy: restored by kubeadm and ready on every node, then
	// the replacement off; Cilium stays the CNI.
	s = e.open(ctx, kubeProxyInv)
	swap = time.Now()
	e.up(ctx, s)
	t.Logf("figures: swap back to kube-proxy took %s", time.Since(swap).Round(time.Millisecond))
	if got := e.kubeProxyObjects(ctx); len(got) != 2 {
		t.Errorf("kube-proxy objects after the swap back: %v", got)
	}
	if out := e.node(ctx, "cp-1", labKubectl+"-n kube-system get daemonset kube-proxy -o jsonpath='{.status.numberReady}'"); out != "7" {
		t.Errorf("kube-proxy ready on %s nodes after the swap back", out)
	}
	e.checkPodNetwork(ctx, s, false)
	if rel := e.release(ctx, s); rel.Revision != 3 {
		t.Errorf("release after the swap back: %+v", rel)
	}
	e.checkGPU(ctx)

	// A failing upgrade (its operator pods cannot be placed) is rolled
	// back to the last good revision.
	e.checkRollback(ctx, s)
	e.noChanges(ctx, s, "up after the rollback")
	t.Logf("figures: the dataplane's part %s", time.Since(start).Round(time.Second))

	// The cluster is healthy and as the inventory says: the seed's
	// incident on it, rather than on a build of its own.
	readdress := time.Now()
	e.checkReaddress(ctx, s, withDataplane("none"))
	t.Logf("figures: the re-address part %s", time.Since(readdress).Round(time.Second))
	t.Logf("figures: whole test %s", time.Since(start).Round(time.Second))
}

// withDataplane is the lab's inventory with kube-proxy's replacement set
// (none or cilium) and the GPU device plugin on.
func withDataplane(replacement string) func(string) string {
	return func(s string) string {
		s = strings.Replace(s, "replacement: none", "replacement: "+replacement, 1)
		return strings.Replace(s, "  extraSANs:", "  gpu: {devicePlugin: {enabled: true}}\n  extraSANs:", 1)
	}
}

// checkFreshCilium checks a cluster built with the replacement from the
// start, while up builds it (build): kubeadm never installs kube-proxy,
// Cilium comes up once every node has joined, and no Node is Ready before
// it. TestCertificatesInTheLab builds that way: a second build only for
// this cost the dataplane test four minutes.
func (e *e2e) checkFreshCilium(ctx context.Context, s *Stack, build func()) {
	t := e.t
	t.Helper()
	w := e.watchNodes(ctx)
	build()
	w.end(t)
	if got := e.kubeProxyObjects(ctx); len(got) != 0 {
		t.Errorf("kube-proxy objects in a fresh Cilium cluster: %v", got)
	}
	e.checkPodNetwork(ctx, s, true)
	if rel := e.release(ctx, s); rel.Revision != 1 {
		t.Errorf("release in a fresh Cilium cluster: %+v", rel)
	}
	e.checkGPU(ctx)
}

func (e *e2e) helmTarget(ctx context.Context, s *Stack) helmrelease.Target {
	e.t.Helper()
	outs, err := s.Outputs(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	return helmrelease.Target{Kubeconfig: []byte(kc), Dial: e.lab.Dial, Namespace: cilium.Namespace, Release: cilium.Release}
}

func (e *e2e) release(ctx context.Context, s *Stack) helmrelease.Live {
	e.t.Helper()
	l, err := helmrelease.Get(ctx, e.helmTarget(ctx, s))
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// checkRollback upgrades the release with values the cluster cannot
// satisfy (the operator bound to nodes that do not exist): the wait fails
// and the release is rolled back to the last good revision.
func (e *e2e) checkRollback(ctx context.Context, s *Stack) {
	e.t.Helper()
	before := e.release(ctx, s)
	ch, err := loader.Load(e.lab.ChartPath())
	if err != nil {
		e.t.Fatal(err)
	}
	broken := map[string]any{}
	for k, v := range before.Values {
		broken[k] = v
	}
	broken["operator"] = map[string]any{"rollOutPods": true, "nodeSelector": map[string]any{"homelab.dev/nowhere": "true"}}
	_, err = helmrelease.Apply(ctx, e.helmTarget(ctx, s), ch, broken, 20*time.Second, nil)
	var rb *helmrelease.RolledBackError
	if !errors.As(err, &rb) || rb.Revision != before.Revision {
		e.t.Fatalf("broken upgrade: %v", err)
	}
	after := e.release(ctx, s)
	if after.Status != "deployed" || after.Chart != before.Chart || after.Revision != before.Revision+2 {
		e.t.Errorf("after the rollback: %+v (before %+v)", after, before)
	}
	if v := e.ciliumConfig(ctx); v["kube-proxy-replacement"] != "false" {
		e.t.Errorf("cilium-config after the rollback: %v", v)
	}
}
