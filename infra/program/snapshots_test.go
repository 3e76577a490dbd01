package program

import (
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/etcdsnapshot"
)

// A snapshot schedule gives every control-plane node its timer, started
// after its files, and makes etcdctl a required tool; workers get none,
// and without a schedule there is no timer anywhere.
func TestSnapshotTimerPerControlPlaneNode(t *testing.T) {
	m := runMockedWith(t, func(inv *inventory.Inventory) {
		inv.Cluster.Etcd.Snapshots = &inventory.Snapshots{Schedule: "6h", Keep: 3}
	})
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		r := m.get(t, "homelab:index:Service", n+":"+etcdsnapshot.Timer)
		if !dependsOn(r, "homelab:index:File", n+":"+etcdsnapshot.TimerPath) || !dependsOn(r, "homelab:index:File", n+":"+etcdsnapshot.ScriptPath) {
			t.Errorf("%s's timer does not wait for its files: %v", n, r.deps)
		}
		if trig := r.inputs["trigger"].StringValue(); len(strings.Split(trig, ",")) != 3 {
			t.Errorf("%s's trigger %q", n, trig)
		}
		var requires []string
		for _, v := range m.get(t, "homelab:index:Host", n).inputs["requires"].ArrayValue() {
			requires = append(requires, v.StringValue())
		}
		if !slices.Contains(requires, "etcdctl") {
			t.Errorf("%s requires %v", n, requires)
		}
	}
	for k := range m.all {
		if strings.Contains(k, etcdsnapshot.Timer) && strings.Contains(k, "gpu-") {
			t.Errorf("a worker got a snapshot timer: %s", k)
		}
	}
	for k := range runMocked(t, inventory.LayoutVIP).all {
		if strings.Contains(k, "etcd-snapshot") {
			t.Errorf("no schedule, yet %s", k)
		}
	}
}
