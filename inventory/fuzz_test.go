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
