package doctor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/gpu"
)

func TestCompareSANs(t *testing.T) {
	missing, extra := compareSANs([]string{"10.0.0.120", "::1", "cp-1"}, []string{"10.0.0.140", "cp-1"}, []string{"::1"})
	if !slices.Equal(missing, []string{"10.0.0.140"}) || !slices.Equal(extra, []string{"10.0.0.120"}) {
		t.Errorf("missing %v extra %v", missing, extra)
	}
}

func TestFlagsAndAddresses(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Command: []string{"etcd",
		"--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.120:2379", "--name=cp-1"}}}}}
	f := flags(pod)
	if f["name"] != "cp-1" {
		t.Errorf("flags: %v", f)
	}
	if got := addressesIn(f["listen-client-urls"]); !slices.Equal(got, []string{"10.0.0.120"}) {
		t.Errorf("addresses (loopback left out): %v", got)
	}
}

func TestReportOK(t *testing.T) {
	r := &Report{}
	r.add("node", "cp-1", Warn, "x")
	if !r.OK() {
		t.Error("a warning failed the report")
	}
	r.add("node", "cp-1", Fail, "y")
	if r.OK() || len(r.Failed()) != 1 {
		t.Error("a failure did not fail the report")
	}
}

func TestJudgeGPUs(t *testing.T) {
	smi := func(n int) string {
		var s string
		for i := 0; i < n; i++ {
			s += "smi=GPU " + string(rune('0'+i)) + ": NVIDIA GeForce RTX 4090 (UUID: GPU-x)\npci=0000:0" + string(rune('1'+i)) + ":00.0 0x030000\n"
		}
		return s
	}
	gpus := func(n int) inventory.Node {
		return inventory.Node{Name: "gpu-1", Role: inventory.RoleWorker, GPUs: &inventory.GPUs{Vendor: "nvidia", Count: n}}
	}
	plain := inventory.Node{Name: "w-1", Role: inventory.RoleWorker}
	for _, tc := range []struct {
		name string
		node inventory.Node
		out  string
		want gpuVerdict
	}{
		{"plain node, no GPU: no row", plain, "", gpuVerdict{source: gpu.SourceNone}},
		{"as declared", gpus(2), smi(2), gpuVerdict{row: true, status: OK, declared: 2, detected: 2, source: gpu.SourceNvidiaSMI}},
		{"emulated homelab: declared, none detected", gpus(1), "", gpuVerdict{row: true, status: Warn, declared: 1, source: gpu.SourceNone}},
		{"one of two GPUs gone", gpus(2), smi(1), gpuVerdict{row: true, status: Warn, declared: 2, detected: 1, source: gpu.SourceNvidiaSMI}},
		{"undeclared GPU", plain, smi(1), gpuVerdict{row: true, status: Warn, detected: 1, source: gpu.SourceNvidiaSMI}},
		{"card without driver", gpus(1), "pci=0000:01:00.0 0x030000\n", gpuVerdict{row: true, status: Warn, declared: 1, detected: 1, source: gpu.SourcePCI, noDriver: true}},
		{"undeclared card without driver counts from PCI", plain, "pci=0000:01:00.0 0x030200\n", gpuVerdict{row: true, status: Warn, detected: 1, source: gpu.SourcePCI}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeGPUs(tc.node, gpu.ParseDetection(tc.out)); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGPURowsNeverFailTheReport(t *testing.T) {
	d := &doctor{t: Target{Inventory: &inventory.Inventory{Nodes: []inventory.Node{
		{Name: "cp-1", Role: inventory.RoleControlPlane},
		{Name: "gpu-1", Role: inventory.RoleWorker, GPUs: &inventory.GPUs{Vendor: "nvidia", Count: 1}},
	}}}, r: &Report{}}
	d.checkGPUs(d.t.Inventory.Nodes[1], &nodeFacts{gpusRead: true})
	d.checkGPUs(d.t.Inventory.Nodes[0], &nodeFacts{gpusRead: true})
	d.checkGPUs(d.t.Inventory.Nodes[1], &nodeFacts{}) // not read: no row
	if len(d.r.Findings) != 1 {
		t.Fatalf("findings %+v", d.r.Findings)
	}
	f := d.r.Findings[0]
	if f.Check != "gpu" || f.Where != "gpu-1" || f.Status != Warn || !d.r.OK() {
		t.Errorf("finding %+v, report ok %v", f, d.r.OK())
	}
}

func TestCNIVerdict(t *testing.T) {
	cilium := cniFacts{read: true, network: cniconf.Network{File: "05-cilium.conflist", Name: "cilium", Plugins: []string{"cilium-cni"}}}
	flannel := cniFacts{read: true, network: cniconf.Network{File: "10-flannel.conflist", Name: "cbr0", Plugins: []string{"flannel", "portmap"}}}
	none := cniFacts{read: true, err: fmt.Errorf("no network config found in /etc/cni/net.d: %w", cniconf.ErrNotInitialized)}
	for _, tc := range []struct {
		name, cni string
		f         cniFacts
		want      Status
		says      string
	}{
		{"Cilium's config", "cilium", cilium, OK, "05-cilium.conflist"},
		{"no config", "cilium", none, Fail, "Cilium's agent writes 05-cilium.conflist"},
		{"another network first", "cilium", flannel, Warn, "another pod network"},
		{"bring your own, installed", "none", flannel, OK, "10-flannel.conflist"},
		{"bring your own, missing", "none", none, Fail, "cluster.cni is none"},
	} {
		st, detail := cniVerdict(tc.cni, tc.f)
		if st != tc.want || !strings.Contains(detail, tc.says) {
			t.Errorf("%s: %s %q, want %s saying %q", tc.name, st, detail, tc.want, tc.says)
		}
	}
}

func TestJudgeSnapshots(t *testing.T) {
	sn := &inventory.Snapshots{Schedule: "1h", Keep: 3}
	for _, c := range []struct {
		facts snapshotFacts
		want  Status
		words string
	}{
		{snapshotFacts{read: true, timerActive: true, count: 2, newest: "snapshot-x.db", age: 90 * time.Minute}, OK, "1h30m0s old"},
		{snapshotFacts{read: true, timerActive: true, count: 3, newest: "snapshot-x.db", age: 121 * time.Minute}, Warn, "more than two intervals"},
		{snapshotFacts{read: true, timerActive: true}, Warn, "no snapshot"},
		{snapshotFacts{read: true, count: 1, age: time.Minute}, Warn, "not running"},
		{snapshotFacts{}, Warn, "could not read"},
	} {
		st, detail := judgeSnapshots(sn, time.Hour, &c.facts)
		if st != c.want || !strings.Contains(detail, c.words) {
			t.Errorf("%+v: %s %q", c.facts, st, detail)
		}
	}
}
