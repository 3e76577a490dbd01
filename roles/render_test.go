package roles

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func testBundle(t testing.TB) *pki.Bundle {
	t.Helper()
	data, err := os.ReadFile("testdata/bundle.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pki.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// layoutInventory loads the shipped homelab in a layout; the dns layout gets
// a name, since the shipped file has none.
func layoutInventory(t testing.TB, layout string) *inventory.Inventory {
	t.Helper()
	inv, _, err := inventory.Load("../inventory/homelab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inv.Cluster.Endpoint.Layout = layout
	if layout == inventory.LayoutDNS {
		inv.Cluster.Endpoint.DNSName = "k8s.home.arpa"
	}
	if _, err := inventory.Validate(inv); err != nil {
		t.Fatal(err)
	}
	return inv
}

var layouts = []string{inventory.LayoutVIP, inventory.LayoutSingleIP, inventory.LayoutDNS}

// TestRender compares every file of every node, in every layout, with the
// golden copy under testdata/TestRender/<layout>/<node>/<path on the node>.
func TestRender(t *testing.T) {
	b := testBundle(t)
	for _, layout := range layouts {
		t.Run(layout, func(t *testing.T) {
			r, err := Render(layoutInventory(t, layout), b)
			if err != nil {
				t.Fatal(err)
			}
			root := filepath.Join("testdata", t.Name())
			got := map[string][]byte{}
			for _, nf := range r.Nodes {
				for _, f := range nf.Files {
					got[filepath.Join(nf.Node.Name, f.Path)] = f.Content
				}
			}
			for _, f := range r.Cluster {
				got[filepath.Join("_cluster", f.Path)] = f.Content
			}
			// What the provider receives besides file bytes is golden too.
			for _, nf := range r.Nodes {
				got[filepath.Join(nf.Node.Name, "_node.yaml")] = nodeFacts(t, nf)
			}
			got[filepath.Join("_cluster", "_cluster-config.yaml")] = r.ClusterConfig
			got[filepath.Join("_cluster", "_cilium-values.yaml")] = r.CiliumValues
			got[filepath.Join("_cluster", "_render.yaml")] = mustYAML(t, map[string]any{
				"apiServerSANs": r.APIServerSANs.Strings(),
				"etcdSANs":      r.EtcdSANs.Strings(),
				"componentArgs": r.ComponentArgs,
			})
			if *update {
				os.RemoveAll(root)
				for p, c := range got {
					dst := filepath.Join(root, p)
					if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(dst, c, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			seen := 0
			err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				want, _ := os.ReadFile(p)
				seen++
				if c, ok := got[rel]; !ok {
					t.Errorf("%s: golden file no longer rendered", rel)
				} else if !bytes.Equal(c, want) {
					t.Errorf("%s differs from golden (run go test ./roles -update and review the diff):\n%s", rel, c)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if seen != len(got) {
				t.Errorf("%d files rendered, %d golden: run go test ./roles -update", len(got), seen)
			}
		})
	}
}

// nodeFacts is a node's render beyond its file bytes: its Node's labels and
// taints, and how each file is handled.
func nodeFacts(t *testing.T, nf NodeFiles) []byte {
	type handling struct {
		Path      string `json:"path"`
		Mode      string `json:"mode"`
		Secret    bool   `json:"secret,omitempty"`
		Transient bool   `json:"transient,omitempty"`
		OnChange  string `json:"onChange,omitempty"`
		Restarts  string `json:"restarts,omitempty"`
	}
	var files []handling
	for _, f := range nf.Files {
		files = append(files, handling{f.Path, fmt.Sprintf("%04o", f.Mode), f.Secret, f.Transient, f.OnChange, f.Restarts})
	}
	return mustYAML(t, map[string]any{"labels": nf.Labels, "taints": nf.Taints, "files": files})
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRenderIsDeterministic(t *testing.T) {
	b := testBundle(t)
	inv := layoutInventory(t, inventory.LayoutVIP)
	first, err := Render(inv, b)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := Render(inv, b)
	for i := range first.Nodes {
		for j, f := range first.Nodes[i].Files {
			if !bytes.Equal(f.Content, second.Nodes[i].Files[j].Content) {
				t.Errorf("%s %s differs between two renders", first.Nodes[i].Node.Name, f.Path)
			}
		}
	}
}

// Which node gets what: the roles' contract, independent of file contents.
func TestRoleFiles(t *testing.T) {
	b := testBundle(t)
	for _, layout := range layouts {
		inv := layoutInventory(t, layout)
		r, err := Render(inv, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, nf := range r.Nodes {
			has := map[string]bool{}
			for _, f := range nf.Files {
				has[f.Path] = true
				if f.Secret && f.Mode&0o077 != 0 {
					t.Errorf("%s %s: secret file with mode %o", nf.Node.Name, f.Path, f.Mode)
				}
				if strings.HasSuffix(f.Path, ".key") && !f.Secret {
					t.Errorf("%s %s: key not marked secret", nf.Node.Name, f.Path)
				}
				// A token never stays on a node: what holds one is written
				// by its step and removed after.
				if bytes.Contains(f.Content, []byte(b.JoinToken(nf.Node.Name))) != f.Transient {
					t.Errorf("%s %s: holds the join token: %v, transient: %v", nf.Node.Name, f.Path, !f.Transient, f.Transient)
				}
				if bytes.Contains(f.Content, []byte(b.BootstrapToken())) {
					t.Errorf("%s %s holds the bundle's token", nf.Node.Name, f.Path)
				}
			}
			cp := nf.Node.IsControlPlane()
			// The single-ip layout's endpoint node cannot join through itself.
			joins := i != 0 || layout != inventory.LayoutSingleIP
			expect := map[string]bool{
				// Any control-plane node may bootstrap, wherever listed.
				"/etc/kubernetes/kubeadm/init.yaml": cp,
				// Every node can (re-)join its peers.
				"/etc/kubernetes/kubeadm/join.yaml":      joins,
				"/etc/kubernetes/kubeadm/discovery.conf": joins,
				"/etc/kubernetes/pki/ca.key":             cp,
				"/etc/kubernetes/pki/etcd/ca.key":        cp,
				"/etc/kubernetes/pki/sa.key":             cp,
				"/etc/kubernetes/encryption/config.yaml": cp,
				"/etc/keepalived/keepalived.conf":        cp && layout == inventory.LayoutVIP,
				// A managed runtime (the shipped inventory's) holds the
				// NVIDIA runtime in config.toml (TestManagedRuntime).
				"/etc/containerd/config.toml":           inv.Cluster.ContainerRuntime.Manage,
				"/etc/containerd/conf.d/99-nvidia.toml": nf.Node.HasGPUs() && !inv.Cluster.ContainerRuntime.Manage,
				"/etc/netplan/60-homelab.yaml":          true,
			}
			for p, want := range expect {
				if has[p] != want {
					t.Errorf("%s layout, %s: has %s = %v, want %v", layout, nf.Node.Name, p, has[p], want)
				}
			}
		}
	}
}
