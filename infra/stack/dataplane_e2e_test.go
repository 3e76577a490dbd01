package stack

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/helmrelease"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/netns"
	"github.com/homelab-dev/homelab/infra/program"
	"github.com/homelab-dev/homelab/roles/cilium"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/kubeadm"
)

// fixtureChart is a test fixture standing in for the Cilium chart (which
// these machines cannot download): a ConfigMap holding the values the
// release got, so a wait succeeds without any container running. broken
// adds a Deployment that never becomes available in the lab.
const fixtureChartName = "homelab-test-fixture"

func buildFixtureChart(t *testing.T, dir, version string, broken bool) string {
	t.Helper()
	src := filepath.Join(dir, "fixture-src-"+version)
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: " + fixtureChartName + "\nversion: " + version + "\ndescription: test fixture, not Cilium\n",
		"values.yaml": "kubeProxyReplacement: false\n",
		"templates/values.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + fixtureChartName + `
  namespace: {{ .Release.Namespace }}
data:
  values.json: {{ toJson .Values | quote }}
`,
	}
	if broken {
		files["templates/never-ready.yaml"] = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + fixtureChartName + `-never-ready
  namespace: {{ .Release.Namespace }}
spec:
  replicas: 1
  selector: {matchLabels: {app: never-ready}}
  template:
    metadata: {labels: {app: never-ready}}
    spec: {containers: [{name: c, image: registry.invalid/none:0}]}
`
	}
	for name, body := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := loader.LoadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const labKubectl = "kubectl --kubeconfig /etc/kubernetes/admin.conf "

var labNodes = []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}
var gpuNodes = []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"}

// seedKubeRules leaves on every node what kube-proxy would have: iptables
// chains and jumps, an nftables table; plus a rule and a kubelet chain that
// are not kube-proxy's and must stay.
func (e *e2e) seedKubeRules(ctx context.Context) {
	for _, n := range labNodes {
		e.node(ctx, n, `set -e
iptables -t nat -N KUBE-SERVICES
iptables -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
iptables -t nat -N KUBE-SVC-TESTFIXTURE
iptables -t nat -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 443 -j KUBE-SVC-TESTFIXTURE
iptables -t mangle -N KUBE-KUBELET-CANARY
iptables -t filter -A INPUT -s 192.0.2.1/32 -m comment --comment homelab-test-keep -j DROP
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

// releaseValues reads the values the fixture's ConfigMap got from Helm.
func (e *e2e) releaseValues(ctx context.Context) map[string]any {
	e.t.Helper()
	out := e.node(ctx, "cp-1", labKubectl+"-n kube-system get configmap "+fixtureChartName+" -o jsonpath='{.data.values\\.json}'")
	v := map[string]any{}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		e.t.Fatalf("fixture values %q: %v", out, err)
	}
	return v
}

// checkGPU: every GPU worker keeps its containerd drop-in (byte for byte
// what the role renders), its label and its taint.
func (e *e2e) checkGPU(ctx context.Context, want string) {
	e.t.Helper()
	for _, n := range gpuNodes {
		if got := e.node(ctx, n, "cat "+gpu.ContainerdDropInPath); got != want {
			e.t.Errorf("%s: %s is\n%s", n, gpu.ContainerdDropInPath, got)
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
// GPU workers alone.
func (e *e2e) checkNoGPUHere(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	for _, n := range gpuNodes {
		if !strings.Contains(e.log.String(), n+": no NVIDIA GPU detected") {
			t.Errorf("the up did not warn that %s has no GPU", n)
		}
	}
	for _, m := range e.mutating() {
		if strings.Contains(m, "apt-get") || strings.Contains(m, "apt-mark") || strings.Contains(m, "restart containerd") {
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
	var placed []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out := e.node(ctx, "cp-1", labKubectl+"-n "+ds+" -o jsonpath='{.status.desiredNumberScheduled}'")
		placed = strings.Fields(e.node(ctx, "cp-1", labKubectl+"-n "+gpu.DevicePluginNamespace+
			" get pods -l name=nvidia-device-plugin-ds -o jsonpath='{range .items[*]}{.spec.nodeName}{\" \"}{end}'"))
		slices.Sort(placed)
		if out == "4" && slices.Equal(placed, gpuNodes) {
			return
		}
	}
	t.Errorf("device plugin pods on %v, want one on each of %v", placed, gpuNodes)
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

// TestDataplaneSwapInTheLab is issue 7's end-to-end run: a kube-proxy
// cluster swapped to the Cilium replacement and back on the live cluster
// (the chart a test fixture), the Helm rollback path, and GPU workers'
// drop-in, labels and taints surviving re-applies and hand edits; then a
// fresh cluster built with the replacement from the start.
func TestDataplaneSwapInTheLab(t *testing.T) {
	needE2E(t)
	e := newE2E(t)
	// The lab's nodes run no containers: kube-proxy's pods never get ready.
	t.Setenv(program.EnvPodWait, "scheduled")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()

	good := buildFixtureChart(t, e.work, "0.1.0", false)
	withChart := func(replacement string) func(string) string {
		return func(s string) string {
			s = strings.Replace(s, "replacement: none", "replacement: "+replacement, 1)
			return strings.Replace(s, "  extraSANs:", "  cilium: {chart: "+good+"}\n  gpu: {devicePlugin: {enabled: true}}\n  extraSANs:", 1)
		}
	}
	kubeProxyInv := e.inventory("kube-proxy", withChart("none"))
	ciliumInv := e.inventory("cilium", withChart("cilium"))

	s := e.open(ctx, kubeProxyInv)
	e.log.Reset()
	e.up(ctx, s)
	if got := e.kubeProxyObjects(ctx); len(got) != 2 {
		t.Fatalf("kube-proxy objects after the first up: %v", got)
	}
	dropIn, _ := gpu.ContainerdDropIn(s.Inv.Nodes[3])
	e.checkGPU(ctx, string(dropIn))
	e.checkNoGPUHere(ctx, s)
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
	v := e.releaseValues(ctx)
	if v["kubeProxyReplacement"] != true || v["k8sServiceHost"] != s.Inv.Cluster.Endpoint.VIP || v["k8sServicePort"] != float64(6443) {
		t.Errorf("release values with the replacement on: %v", v)
	}
	rel := e.release(ctx, s)
	if rel.Revision != 1 || rel.Chart != fixtureChartName+"-0.1.0" {
		t.Errorf("release after install: %+v", rel)
	}

	// Re-applying changes nothing, GPU workers included.
	e.mutating()
	e.noChanges(ctx, s, "second up with the replacement")
	if m := e.mutating(); len(m) > 0 {
		t.Errorf("second up ran mutating commands: %v", m)
	}
	e.checkGPU(ctx, string(dropIn))

	// Hand edits to a GPU worker's runtime config, label and taint, and
	// kube-proxy's rules coming back on a node, are all repaired.
	e.node(ctx, "gpu-1", "echo '# edited by hand' >> "+gpu.ContainerdDropInPath)
	e.node(ctx, "cp-1", labKubectl+"label node gpu-2 "+kubeadm.GPUPresentLabel+"-")
	e.node(ctx, "cp-1", labKubectl+"taint node gpu-3 "+kubeadm.GPUTaintKey+":NoSchedule-")
	e.node(ctx, "gpu-4", "iptables -t nat -N KUBE-SVC-TESTFIXTURE")
	got = e.previewList(ctx, s, true)
	want = []string{
		"update homelab:index:Dataplane dataplane",
		"update homelab:index:File gpu-1:" + gpu.ContainerdDropInPath,
		"update homelab:index:NodeMeta gpu-2",
		"update homelab:index:NodeMeta gpu-3",
	}
	if !slices.Equal(got, want) {
		t.Errorf("drift preview lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	e.up(ctx, s)
	e.checkGPU(ctx, string(dropIn))
	e.checkKubeRules(ctx, false)

	// Back to kube-proxy: restored by kubeadm, then the replacement off.
	s = e.open(ctx, kubeProxyInv)
	swap = time.Now()
	e.up(ctx, s)
	t.Logf("figures: swap back to kube-proxy took %s", time.Since(swap).Round(time.Millisecond))
	if got := e.kubeProxyObjects(ctx); len(got) != 2 {
		t.Errorf("kube-proxy objects after the swap back: %v", got)
	}
	if v := e.releaseValues(ctx); v["kubeProxyReplacement"] != false {
		t.Errorf("release values after the swap back: %v", v)
	}
	if rel := e.release(ctx, s); rel.Revision != 2 {
		t.Errorf("release after the swap back: %+v", rel)
	}
	e.checkGPU(ctx, string(dropIn))

	// A failing upgrade (its Deployment never becomes available here) is
	// rolled back to the last good revision.
	e.checkRollback(ctx, s)
	e.noChanges(ctx, s, "up after the rollback")

	// A fresh cluster with the replacement: kubeadm never installs
	// kube-proxy, the release is installed once the control plane is up.
	e.destroy(ctx, s)
	s = e.open(ctx, ciliumInv)
	e.up(ctx, s)
	if got := e.kubeProxyObjects(ctx); len(got) != 0 {
		t.Errorf("kube-proxy objects in a fresh Cilium cluster: %v", got)
	}
	if rel := e.release(ctx, s); rel.Revision != 1 || rel.Values["kubeProxyReplacement"] != true {
		t.Errorf("release in a fresh Cilium cluster: %+v", rel)
	}
	e.checkGPU(ctx, string(dropIn))
	e.noChanges(ctx, s, "second up of a fresh Cilium cluster")
	t.Logf("figures: whole test %s", time.Since(start).Round(time.Second))
}

func (e *e2e) helmTarget(ctx context.Context, s *Stack) helmrelease.Target {
	e.t.Helper()
	outs, err := s.Outputs(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	kc, _ := outs["kubeconfig"].Value.(string)
	return helmrelease.Target{Kubeconfig: []byte(kc), Dial: netns.DialerFor(lab.GatewayNetns), Namespace: cilium.Namespace, Release: cilium.Release}
}

func (e *e2e) release(ctx context.Context, s *Stack) helmrelease.Live {
	e.t.Helper()
	l, err := helmrelease.Get(ctx, e.helmTarget(ctx, s))
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *e2e) checkRollback(ctx context.Context, s *Stack) {
	e.t.Helper()
	before := e.release(ctx, s)
	broken, err := loader.Load(buildFixtureChart(e.t, e.work, "0.2.0", true))
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = helmrelease.Apply(ctx, e.helmTarget(ctx, s), broken, before.Values, 15*time.Second, nil)
	var rb *helmrelease.RolledBackError
	if !errors.As(err, &rb) || rb.Revision != before.Revision {
		e.t.Fatalf("broken upgrade: %v", err)
	}
	after := e.release(ctx, s)
	if after.Status != "deployed" || after.Chart != before.Chart || after.Revision != before.Revision+2 {
		e.t.Errorf("after the rollback: %+v (before %+v)", after, before)
	}
	if v := e.releaseValues(ctx); v["kubeProxyReplacement"] != false {
		e.t.Errorf("values after the rollback: %v", v)
	}
}
