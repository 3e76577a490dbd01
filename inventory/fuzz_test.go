package inventory

import (
	"os"
	"testing"
)

// FuzzParse: bad input must give errors, never a panic, and an accepted
// inventory must validate again unchanged.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"homelab.yaml", "lab.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("cluster: {endpoint: {layout: single-ip, node: x}}\nnodes: [{name: x, role: control-plane, address: 1.2.3.4}]"))
	f.Add([]byte("nodes: [*a]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("cluster: {extraSANs: [10.0.0.999, '::1', '*.x']}\n"))
	// Aliases: shared values, an alias of the wrong kind, an alias as a
	// key, and small alias bombs the walk must bound, not expand.
	f.Add([]byte("cluster: {network: {nodeCIDR: 10.0.0.0/24}}\nnodes: [{name: a, role: control-plane, address: 10.0.0.11, labels: &l {k: v}, taints: &t ['x:NoSchedule']}, {name: b, role: worker, address: 10.0.0.12, labels: *l, taints: *t}]\n"))
	f.Add([]byte("cluster: &c {name: x}\nssh: *c\nnodes: [*c]\n"))
	f.Add([]byte("cluster: {network: &n {nodeCIDR: 10.0.0.0/24}}\nnodes: [{name: a, labels: {? *n : v}}]\n"))
	for _, bomb := range aliasBombs(4096) {
		f.Add(bomb)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, _, err := Parse(data)
		if err != nil {
			if len(Problems(err)) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		if _, err := Validate(inv); err != nil {
			t.Fatalf("accepted, then invalid on revalidation: %v", err)
		}
	})
}
