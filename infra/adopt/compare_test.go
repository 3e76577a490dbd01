package adopt

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

const labInventory = "../../inventory/lab.yaml"

func loadLab(t *testing.T) *inventory.Inventory {
	t.Helper()
	inv, _, err := inventory.Load(labInventory)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// certWith is an apiserver certificate carrying these SANs.
func certWith(t *testing.T, sans []string) *x509.Certificate {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

// healthy is the live state of the lab inventory's cluster, fully set up
// by kubeadm as declared, before adoption (no markers).
func healthy(t *testing.T, inv *inventory.Inventory) *Live {
	t.Helper()
	want := apiServerSANs(inv)
	crt := certWith(t, want)
	l := &Live{Source: "cp-1", Nodes: map[string]*NodeFacts{}, ControlPlaneEndpoint: inv.Endpoint(), Served: want,
		Encryption: Encryption{Flag: "/etc/kubernetes/encryption/config.yaml", HostPath: "/etc/kubernetes/encryption/config.yaml",
			Providers: []string{"secretbox", "identity"}, SecretboxKey: "k", SecretboxKeyName: OurKeyName}}
	for i, n := range inv.Nodes {
		f := &NodeFacts{Name: n.Name, Files: map[string]bool{nodefacts.KubeletConf: true}, CACert: []byte("ca")}
		if n.IsControlPlane() {
			f.Files[nodefacts.AdminConf], f.Files[nodefacts.Manifest(nodefacts.KubeAPIServer)], f.Files[nodefacts.Manifest(nodefacts.Etcd)], f.Files[nodefacts.AnyManifest], f.Files[nodefacts.EtcdMemberDir] = true, true, true, true, true
			f.APIServerCert = crt
			f.Keepalived = []byte("vrrp_instance API_VIP {\n}\n")
			l.Members = append(l.Members, Member{ID: uint64(i + 1), Name: n.Name, PeerURL: "https://" + n.Address + ":2380"})
		}
		l.Nodes[n.Name] = f
		l.APINodes = append(l.APINodes, APINode{Name: n.Name, InternalIP: n.Address, ControlPlane: n.IsControlPlane()})
	}
	return l
}

type row struct {
	check, where string
	status       Status
}

func rowsOf(checks []Check) map[row]bool {
	out := map[row]bool{}
	for _, c := range checks {
		out[row{c.Check, c.Where, c.Status}] = true
	}
	return out
}

func TestCompare(t *testing.T) {
	inv := loadLab(t)
	tests := []struct {
		name string
		edit func(l *Live)
		// want rows must be there; notOK lists every (check, where) that
		// is not ok, exactly.
		want []row
	}{
		{"as declared", func(l *Live) {}, nil},
		{"a worker not joined", func(l *Live) {
			l.Nodes["gpu-4"] = &NodeFacts{Name: "gpu-4", Files: map[string]bool{}}
			l.APINodes = slices.DeleteFunc(l.APINodes, func(n APINode) bool { return n.Name == "gpu-4" })
		}, []row{{CheckNode, "gpu-4", Missing}, {CheckKubeadm, "gpu-4", Missing}}},
		{"a half-joined control-plane node", func(l *Live) {
			delete(l.Nodes["cp-3"].Files, nodefacts.Manifest(nodefacts.KubeAPIServer))
			l.Members = slices.DeleteFunc(l.Members, func(m Member) bool { return m.Name == "cp-3" })
		}, []row{{CheckEtcd, "cp-3", Missing}, {CheckKubeadm, "cp-3", Differs}}},
		{"an undeclared Node and etcd member", func(l *Live) {
			l.APINodes = append(l.APINodes, APINode{Name: "old-cp", InternalIP: "10.77.0.99", ControlPlane: true})
			l.Members = append(l.Members, Member{ID: 99, Name: "old-cp", PeerURL: "https://10.77.0.99:2380"})
		}, []row{{CheckNode, "old-cp", Differs}, {CheckEtcd, "old-cp", Differs}}},
		{"a stale peer URL and another InternalIP", func(l *Live) {
			l.Members[1].PeerURL = "https://10.77.0.140:2380"
			l.APINodes[1].InternalIP = "10.77.0.140"
		}, []row{{CheckEtcd, "cp-2", Differs}, {CheckNode, "cp-2", Differs}}},
		{"a worker registered as control plane", func(l *Live) {
			l.APINodes[3].ControlPlane = true
		}, []row{{CheckNode, "gpu-1", Differs}, {CheckKubeadm, "gpu-1", Differs}}},
		{"the endpoint is cp-1's own address", func(l *Live) {
			l.ControlPlaneEndpoint = "10.77.0.120:6443"
		}, []row{{CheckEndpoint, "kubeadm-config", Differs}}},
		{"the endpoint without its port", func(l *Live) {
			l.ControlPlaneEndpoint = inv.EndpointHost()
		}, nil},
		{"certificates lack a SAN", func(l *Live) {
			want := apiServerSANs(inv)
			short := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "10.77.0.122" })
			l.Nodes["cp-2"].APIServerCert = certWith(t, short)
			l.Served = short
		}, []row{{CheckAPISANs, "cp-2:/etc/kubernetes/pki/apiserver.crt", Differs}, {CheckAPISANs, "served at " + inv.Endpoint(), Differs}}},
		{"the endpoint does not answer", func(l *Live) {
			l.Served, l.ServedErr = nil, errors.New("connection refused")
		}, []row{{CheckAPISANs, "served at " + inv.Endpoint(), Missing}}},
		{"keepalived passwords differ, one node has none", func(l *Live) {
			l.Nodes["cp-1"].Keepalived = []byte("auth_pass aaaa\n")
			l.Nodes["cp-2"].Keepalived = []byte("auth_pass bbbb\n")
			l.Nodes["cp-3"].Keepalived = nil
		}, []row{{CheckKeepalived, "cp-2:" + keepalived.ConfigPath, Differs}, {CheckKeepalived, "cp-3:" + keepalived.ConfigPath, Missing}}},
		{"no encryption at rest", func(l *Live) {
			l.Encryption = Encryption{}
		}, []row{{CheckEncryption, "cp-1:kube-apiserver", Missing}}},
		{"aescbc encryption", func(l *Live) {
			l.Encryption = Encryption{Flag: "/x", HostPath: "/x", Providers: []string{"aescbc", "identity"}}
		}, []row{{CheckEncryption, "cp-1:kube-apiserver", Differs}}},
		{"secretbox under another key name", func(l *Live) {
			l.Encryption.SecretboxKeyName = "key1"
		}, []row{{CheckEncryption, "cp-1:kube-apiserver", Differs}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := healthy(t, inv)
			tt.edit(l)
			checks := Compare(inv, l, Plan(inv, l))
			got := rowsOf(checks)
			for _, w := range tt.want {
				if !got[w] {
					t.Errorf("no row %v", w)
				}
			}
			for _, c := range checks {
				if c.Status == OK {
					continue
				}
				if !slices.Contains(tt.want, row{c.Check, c.Where, c.Status}) {
					t.Errorf("unexpected %s row: %s %s: %s", c.Status, c.Check, c.Where, c.Detail)
				}
				if c.Change == "" {
					t.Errorf("%s %s is %s but says nothing of what changes it", c.Check, c.Where, c.Status)
				}
			}
		})
	}
}

func TestPlan(t *testing.T) {
	inv := loadLab(t)
	type want struct {
		verified, marked, partial bool
		marker                    string
	}
	tests := []struct {
		name string
		edit func(l *Live)
		want map[string]want
	}{
		{"all set up: the first control-plane node gets the init marker", func(l *Live) {}, map[string]want{
			"cp-1":  {verified: true, marker: nodefacts.InitMarker},
			"cp-2":  {verified: true, marker: nodefacts.JoinMarker},
			"gpu-1": {verified: true, marker: nodefacts.JoinMarker},
		}},
		{"already marked", func(l *Live) {
			l.Nodes["cp-1"].Files[nodefacts.InitMarker] = true
			l.Nodes["gpu-2"].Files[nodefacts.JoinMarker] = true
		}, map[string]want{
			"cp-1":  {verified: true, marked: true, marker: nodefacts.InitMarker},
			"gpu-2": {verified: true, marked: true, marker: nodefacts.JoinMarker},
		}},
		{"first control-plane node without admin.conf", func(l *Live) {
			delete(l.Nodes["cp-1"].Files, nodefacts.AdminConf)
		}, map[string]want{"cp-1": {partial: true, marker: nodefacts.InitMarker}}},
		{"a joined control-plane node without its etcd member", func(l *Live) {
			l.Members = slices.DeleteFunc(l.Members, func(m Member) bool { return m.Name == "cp-2" })
		}, map[string]want{"cp-2": {partial: true, marker: nodefacts.JoinMarker}}},
		{"a worker whose Node is gone", func(l *Live) {
			l.APINodes = slices.DeleteFunc(l.APINodes, func(n APINode) bool { return n.Name == "gpu-3" })
		}, map[string]want{"gpu-3": {partial: true, marker: nodefacts.JoinMarker}}},
		{"a blank worker", func(l *Live) {
			l.Nodes["gpu-4"].Files = map[string]bool{}
			l.APINodes = slices.DeleteFunc(l.APINodes, func(n APINode) bool { return n.Name == "gpu-4" })
		}, map[string]want{"gpu-4": {marker: nodefacts.JoinMarker}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := healthy(t, inv)
			tt.edit(l)
			plan := Plan(inv, l)
			if len(plan) != len(inv.Nodes) {
				t.Fatalf("%d plans for %d nodes", len(plan), len(inv.Nodes))
			}
			for _, p := range plan {
				w, ok := tt.want[p.Node]
				if !ok {
					w = want{verified: true, marker: nodefacts.JoinMarker}
					if p.Node == "cp-1" {
						w.marker = nodefacts.InitMarker
					}
				}
				got := want{verified: p.Verified, marked: p.Marked, partial: p.Partial, marker: p.Marker}
				if got != w {
					t.Errorf("%s: got %+v (lacks %v), want %+v", p.Node, got, p.Lacks, w)
				}
				if p.NeedsMarker() != (w.verified && !w.marked) {
					t.Errorf("%s: NeedsMarker %t", p.Node, p.NeedsMarker())
				}
			}
		})
	}
}

func TestPlanSummary(t *testing.T) {
	plan := []NodePlan{{Node: "cp-1", Verified: true}, {Node: "gpu-3", Partial: true}, {Node: "gpu-4"}}
	changes := []stack.Change{{Op: "create"}, {Op: "create"}, {Op: "update"}}
	got := PlanSummary(changes, plan)
	for _, w := range []string{"2 to create", "1 to update", "0 to replace", "0 to delete", "joins gpu-4", "resets and sets up again gpu-3"} {
		if !strings.Contains(got, w) {
			t.Errorf("summary lacks %q: %s", w, got)
		}
	}
	if got := PlanSummary(nil, plan[:1]); !strings.Contains(got, "no kubeadm init, join or reset") {
		t.Errorf("all adopted: %s", got)
	}
}

func TestHolds(t *testing.T) {
	b, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.New()
	if err != nil {
		t.Fatal(err)
	}
	clone := func(edit func(c *pki.Bundle)) *pki.Bundle {
		data, _ := b.Marshal()
		c, err := pki.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		edit(c)
		return c
	}
	tests := []struct {
		name              string
		old               *pki.Bundle
		vrrpFrom, keyFrom string
		want              bool
	}{
		{"the same", clone(func(*pki.Bundle) {}), "cp-1", "/k", true},
		{"another cluster", other, "", "", false},
		{"another token: still this cluster's", clone(func(c *pki.Bundle) { c.Talos.Secrets.BootstrapToken = "abcdef.0123456789abcdef" }), "cp-1", "/k", true},
		{"another VRRP password, the live one kept", clone(func(c *pki.Bundle) { c.VRRPPassword = "other" }), "cp-1", "", false},
		{"another VRRP password, none live", clone(func(c *pki.Bundle) { c.VRRPPassword = "other" }), "", "", true},
		{"another encryption key, the live one kept", clone(func(c *pki.Bundle) { c.Talos.Secrets.SecretboxEncryptionSecret = "eA==" }), "", "/k", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Adoption{Bundle: b, VRRPFrom: tt.vrrpFrom, KeyFrom: tt.keyFrom}
			if got := a.Holds(tt.old); got != tt.want {
				t.Errorf("Holds = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestPrepareRefusesBadFrom(t *testing.T) {
	inv := loadLab(t)
	for _, from := range []string{"gpu-1", "nope"} {
		_, err := Prepare(t.Context(), Target{Inventory: inv, From: from})
		if err == nil || !strings.Contains(err.Error(), "--from "+from) {
			t.Errorf("--from %s: %v", from, err)
		}
	}
}

// Cilium must not be installed over another pod network the cluster runs.
func TestCNIStatus(t *testing.T) {
	flannel := &NodeFacts{CNIRead: true, CNI: cniconf.Network{File: "10-flannel.conflist", Name: "cbr0"}}
	ciliums := &NodeFacts{CNIRead: true, CNI: cniconf.Network{File: "05-cilium.conflist", Name: "cilium"}}
	none := &NodeFacts{CNIRead: true, CNIErr: cniconf.ErrNotInitialized}
	for _, tc := range []struct {
		cni  string
		f    *NodeFacts
		want Status
		says string
	}{
		{"cilium", flannel, Differs, "cluster.cni: none"},
		{"cilium", ciliums, OK, ""},
		{"cilium", none, OK, "up installs Cilium"},
		{"none", flannel, OK, ""},
		{"none", none, Differs, "install your pod network"},
	} {
		st, _, change := cniStatus(tc.cni, tc.f)
		if st != tc.want || !strings.Contains(change, tc.says) {
			t.Errorf("cni %s, %+v: %s %q", tc.cni, tc.f.CNI, st, change)
		}
	}
}

func apiServerSANs(inv *inventory.Inventory) []string {
	api, _ := nodefacts.ServingCertOf(nodefacts.APIServerCert)
	return api.Required(inv)
}
