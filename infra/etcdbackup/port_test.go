package etcdbackup

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
)

// A restore waits for the apiserver where the inventory puts it
// (cluster.endpoint.port), not at kubeadm's default: at another port it
// would replace the data and then time out half-way.
func TestRestoreWaitsAtTheInventorysAPIPort(t *testing.T) {
	for _, tc := range []struct {
		port int
		want string
	}{{8443, "8443"}, {0, "6443"}} {
		inv := &inventory.Inventory{}
		inv.Cluster.Endpoint.Port = tc.port
		tg := Target{Inventory: inv}
		s := &nodeState{node: &node{}, flags: map[string]string{}}
		s.Address = "10.0.0.11"
		if got := tg.apiURL(s); got != "https://10.0.0.11:"+tc.want {
			t.Errorf("port %d: the apiserver waited for at %s", tc.port, got)
		}
		s.flags["advertise-client-urls"] = "https://10.0.0.21:2379"
		if got := tg.apiURL(s); got != "https://10.0.0.21:"+tc.want {
			t.Errorf("port %d, advertised: the apiserver waited for at %s", tc.port, got)
		}
		q := tg.listeners().String()
		if !strings.Contains(q, ":"+tc.want+" ") || !strings.Contains(q, ":2379 ") {
			t.Errorf("port %d: the stop waits for listeners %q", tc.port, q)
		}
		if out, err := exec.Command("sh", "-n", "-c", q).CombinedOutput(); err != nil {
			t.Errorf("%q: %v %s", q, err, out)
		}
	}
}
