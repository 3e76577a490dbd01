package roles

import (
	"fmt"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

// generated returns an inventory file with n nodes: three control-plane
// nodes, the rest GPU workers.
func generated(n int) []byte {
	var b strings.Builder
	b.WriteString(`cluster:
  name: big
  endpoint: {layout: vip, vip: 10.0.255.250, port: 6443}
  network: {nodeCIDR: 10.0.0.0/16, gateway: 10.0.0.1, podCIDR: 10.128.0.0/12, serviceCIDR: 10.96.0.0/12}
  kubeProxy: {replacement: cilium}
nodes:
`)
	for i := range n {
		role, name := "worker", fmt.Sprintf("gpu-%d", i)
		if i < 3 {
			role, name = "control-plane", fmt.Sprintf("cp-%d", i+1)
		}
		fmt.Fprintf(&b, "  - name: %s\n    role: %s\n    address: 10.0.%d.%d\n    mac: \"52:54:00:00:%02x:%02x\"\n    labels: {rack: r%d}\n",
			name, role, (i+2)/250, (i+2)%250+2, (i+2)/250, (i+2)%250+2, i%8)
		if role == "worker" {
			b.WriteString("    gpus: {vendor: nvidia, count: 1}\n")
		}
	}
	return []byte(b.String())
}

// BenchmarkLoadValidateRender: goal under 1 s for 1,000 nodes, growing
// linearly; compare ns/op across the sizes.
func BenchmarkLoadValidateRender(b *testing.B) {
	bundle := testBundle(b)
	for _, n := range []int{250, 500, 1000} {
		data := generated(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				inv, _, err := inventory.Parse(data)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Render(inv, bundle); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestGeneratedInventoryIsValid(t *testing.T) {
	inv, _, err := inventory.Parse(generated(1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Nodes) != 1000 {
		t.Fatalf("%d nodes", len(inv.Nodes))
	}
}
