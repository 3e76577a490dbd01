package doctor

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/netplan"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

func TestAddressesIn(t *testing.T) {
	if got := addressesIn("https://127.0.0.1:2379,https://10.0.0.120:2379"); !slices.Equal(got, []string{"10.0.0.120"}) {
		t.Errorf("addresses (loopback left out): %v", got)
	}
}

// The seed's crash loop is found whichever way the manifest carries its
// flags: kubeadm's in command, a hand-built etcd's in args.
func TestCheckManifestsReadsArgs(t *testing.T) {
	inv := &inventory.Inventory{
		Cluster: inventory.Cluster{Network: inventory.Network{NodeCIDR: "10.0.0.0/24"}},
		Nodes:   []inventory.Node{{Name: "cp-1", Role: inventory.RoleControlPlane, Address: "10.0.0.140"}},
	}
	d := &doctor{t: Target{Inventory: inv}, r: &Report{}}
	f := &nodeFacts{node: inv.Nodes[0], reached: true, addrs: []string{"10.0.0.140"}, live: nodefacts.Live{Files: map[string][]byte{
		nodefacts.Manifest(nodefacts.Etcd): []byte(`spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.5-0
    args: [--name=cp-1, "--listen-peer-urls=https://10.0.0.120:2380"]
`),
		nodefacts.Manifest(nodefacts.KubeAPIServer): []byte(`spec:
  containers:
  - name: kube-apiserver
    command: [kube-apiserver, --advertise-address=10.0.0.140]
`),
	}}}
	d.checkManifests(inv.Nodes[0], f)
	var failed []string
	for _, x := range d.r.Failed() {
		failed = append(failed, x.Where)
	}
	if !slices.Equal(failed, []string{"cp-1:" + nodefacts.Manifest(nodefacts.Etcd)}) {
		t.Errorf("failed %v, want etcd.yaml alone (its --listen-peer-urls in args)", d.r.Findings)
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

func TestExpiryVerdict(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		left   time.Duration
		want   Status
		saying string
	}{
		{300 * 24 * time.Hour, OK, "300 days left"},
		{31 * 24 * time.Hour, OK, "31 days left"},
		{29 * 24 * time.Hour, Warn, "renewBefore"},
		{time.Hour, Warn, "1h0m0s"},
		{-time.Minute, Fail, "expired 1m0s ago"},
	} {
		st, detail := expiryVerdict(nodefacts.Expiry{Path: "/etc/kubernetes/pki/apiserver.crt", Subject: "kube-apiserver", NotAfter: now.Add(tc.left)}, now, 720*time.Hour)
		if st != tc.want || !strings.Contains(detail, tc.saying) || !strings.Contains(detail, "kube-apiserver") {
			t.Errorf("%s left: %s %q", tc.left, st, detail)
		}
	}
	// A kubelet client certificate embedded in kubelet.conf is never
	// rotated, however long it has left: up repairs it.
	st, detail := expiryVerdict(nodefacts.Expiry{Path: nodefacts.KubeletConf, Subject: "system:node:gpu-1", NotAfter: now.Add(300 * 24 * time.Hour)}, now, 720*time.Hour)
	if st != Warn || !strings.Contains(detail, "nothing rotates it") || !strings.Contains(detail, nodefacts.KubeletClientCert) {
		t.Errorf("embedded in kubelet.conf: %s %q", st, detail)
	}
	if st, _ := expiryVerdict(nodefacts.Expiry{Path: nodefacts.KubeletConf, Subject: "system:node:gpu-1", NotAfter: now.Add(-time.Minute)}, now, 720*time.Hour); st != Fail {
		t.Errorf("an expired one embedded in kubelet.conf: %s", st)
	}
}

// The declared address is checked live: there, and static, not a lease
// that happens to match today.
func TestCheckStatic(t *testing.T) {
	n := inventory.Node{Name: "cp-1", Role: inventory.RoleControlPlane, Address: "10.0.0.120"}
	for _, tc := range []struct {
		name    string
		dynamic []string
		want    Status
	}{
		{"static", nil, OK},
		{"another address leased", []string{"10.0.0.200"}, OK},
		{"the declared address leased", []string{"10.0.0.120"}, Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &doctor{t: Target{Inventory: &inventory.Inventory{Nodes: []inventory.Node{n}}}, r: &Report{}}
			d.checkStatic(n, &nodeFacts{node: n, reached: true, addrs: []string{"10.0.0.120"}, dynamic: tc.dynamic})
			if len(d.r.Findings) != 1 || d.r.Findings[0].Status != tc.want {
				t.Fatalf("findings %+v, want one %s", d.r.Findings, tc.want)
			}
			if tc.want == Fail && (len(d.r.Causes) != 1 || !strings.Contains(d.r.Causes[0], "homelab up")) {
				t.Errorf("causes %v: want the fix named", d.r.Causes)
			}
		})
	}
}

// The netplan row: homelab's definition is the one systemd-networkd
// configures the NIC from, alone, and as the inventory declares it.
func TestCheckNetplan(t *testing.T) {
	n := inventory.Node{Name: "cp-1", Role: inventory.RoleControlPlane, Address: "10.0.0.11", Interface: "eth0"}
	inv := &inventory.Inventory{Nodes: []inventory.Node{n}}
	inv.Cluster.Network.NodeCIDR = "10.0.0.0/24"
	inv.Cluster.Network.Gateway = "10.0.0.1"
	content, err := netplan.Render(inv, n)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	declared := hex.EncodeToString(sum[:])
	owned := netplan.NetworkFileFor("eth0")
	for _, tc := range []struct {
		name      string
		live      *netplan.Live
		want      Status
		wantCause string
	}{
		{"converged", &netplan.Live{Installed: true, Sha256: declared, NetworkFile: owned}, OK, ""},
		{"no netplan", &netplan.Live{}, OK, ""},
		{"not read", nil, Warn, ""},
		{"never applied", &netplan.Live{Installed: true, NetworkFile: "/run/systemd/network/10-netplan-eth0.network"}, Fail, "homelab up"},
		{"the installer's file beside", &netplan.Live{Installed: true, Sha256: declared, NetworkFile: owned, Competing: netplan.Competing{Disable: []string{"/etc/netplan/50-cloud-init.yaml"}}}, Fail, "moves"},
		{"networkd configures the NIC from another file", &netplan.Live{Installed: true, Sha256: declared, NetworkFile: "/etc/systemd/network/eth0.network"}, Fail, "NetworkManager"},
		{"nothing configures the NIC", &netplan.Live{Installed: true, Sha256: declared}, Fail, "homelab up"},
		{"the file differs from the inventory", &netplan.Live{Installed: true, Sha256: "0ld", NetworkFile: owned}, Warn, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &doctor{t: Target{Inventory: inv}, r: &Report{}}
			d.checkNetplan(n, &nodeFacts{node: n, reached: true, netplan: tc.live})
			if len(d.r.Findings) != 1 || d.r.Findings[0].Status != tc.want {
				t.Fatalf("findings %+v, want one %s", d.r.Findings, tc.want)
			}
			if tc.wantCause != "" && (len(d.r.Causes) != 1 || !strings.Contains(d.r.Causes[0], tc.wantCause)) {
				t.Errorf("causes %v: want one saying %q", d.r.Causes, tc.wantCause)
			}
		})
	}
}
