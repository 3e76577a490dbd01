package drill

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/impact"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/homelab-dev/homelab/infra/lab/labtest"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/inventory"
)

func TestMain(m *testing.M) { labtest.Main(m) }

func needE2E(t testing.TB) { labtest.Need(t, "pulumi", "kubeadm") }

// labForTest brings up a lab from inventory/lab.yaml and returns it with
// the inventory (SSH paths pointed at the lab's) and a work directory.
func labForTest(t testing.TB, ctx context.Context) (*lab.Lab, string, string) {
	l := labtest.Up(t, ctx, "drill", nil)
	return l.Lab, l.InventoryPath, l.Work
}

// ciDrills are the drills CI runs on each layout's one cluster, one after
// another: every failure kind at least once (the VIP holder, or the
// endpoint's node, where the kind matters most), and two nodes lost.
var ciDrills = map[string][]impact.Failure{
	inventory.LayoutVIP: {
		impact.NewFailure(impact.FailOff, "cp-1"),
		impact.NewFailure(impact.FailCut, "cp-1"),
		impact.NewFailure(impact.FailKeepalived, "cp-1"),
		impact.NewFailure(impact.FailAPIServer, "cp-1"),
		impact.NewFailure(impact.FailOff, "cp-1", "cp-2"),
	},
	inventory.LayoutSingleIP: {
		impact.NewFailure(impact.FailOff, "cp-1"),
		impact.NewFailure(impact.FailCut, "cp-2"),
		impact.NewFailure(impact.FailKeepalived, "cp-1"),
		impact.NewFailure(impact.FailAPIServer, "cp-1"),
		impact.NewFailure(impact.FailOff, "cp-2", "cp-3"),
	},
}

// TestDrillsMatchCompare is issue 20's acceptance: for the vip and
// single-ip layouts, one cluster each, a drill of each failure kind
// (power-off, cut, keepalived killed, apiserver stopped, two nodes off),
// and every cell compare predicts for it (each consumer's state and
// address, etcd's members up and healthy, quorum, writes, read-only or
// unavailable data, who the LAN reaches through the VIP, every VIP holder,
// no split brain beyond the prediction, the holder after recovery) is what
// the drill measured.
func TestDrillsMatchCompare(t *testing.T) {
	labtest.Long(t, "ten drills on two layouts hold the lab about 10 minutes")
	needE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	l, invPath, work := labForTest(t, ctx)
	stateDir := filepath.Join(work, "state")
	progress := &lab.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			lines := strings.Split(progress.String(), "\n")
			t.Logf("engine output (tail):\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	for _, layout := range []string{inventory.LayoutVIP, inventory.LayoutSingleIP} {
		start := time.Now()
		path, _, err := LayoutInventory(invPath, layout, work)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Build(ctx, l, path, stateDir, progress)
		if err != nil {
			t.Fatalf("%s: build: %v", layout, err)
		}
		t.Logf("figures: %s layout built in %s", layout, time.Since(start).Round(time.Second))
		for _, f := range ciDrills[layout] {
			start := time.Now()
			r, checks, err := drillOnce(ctx, l, s, f, 12*time.Second)
			if err != nil {
				t.Fatalf("%s, %s: %v", layout, f.ID, err)
			}
			var tl bytes.Buffer
			WriteTimeline(&tl, r)
			t.Logf("%s layout, %s (%s):\n%s", layout, f.ID, time.Since(start).Round(time.Second), tl.String())
			for _, m := range Mismatches(checks) {
				t.Errorf("%s, %s: %s predicted %q, measured %q", layout, f.ID, m.Item, m.Predicted, m.Measured)
			}
		}
	}
}

// drillOnce drills f on the built cluster against compare's prediction.
func drillOnce(ctx context.Context, l *lab.Lab, s *stack.Stack, f impact.Failure, window time.Duration) (*Result, []Check, error) {
	cl, err := impact.ReadInventory(s.Inv, s.Bundle)
	if err != nil {
		return nil, nil, err
	}
	if err := cl.Check(f); err != nil {
		return nil, nil, err
	}
	want := cl.Evaluate(f)
	o := Options{Lab: l, Inventory: s.Inv, Bundle: s.Bundle, Failure: f, Window: window, Recover: true, VIPAfter: want.VIPAfter}
	if s.Inv.Cluster.Endpoint.Layout == inventory.LayoutVIP {
		o.VIPBefore = cl.InitialHolder()
	}
	r, err := RunSettled(ctx, o, 3*time.Minute)
	if err != nil {
		return r, nil, err
	}
	return r, Compare(want, cl.Consumers, r), nil
}
