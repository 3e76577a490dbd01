package lab

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClusterE2E is issue 3's acceptance: an HA cluster from roles.Render's
// files and plain SSH, then the first control-plane node loses power.
func TestClusterE2E(t *testing.T) {
	needLab(t)
	l := newTestLab(t)
	c, fig := bringUpCluster(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Settle, then weigh the lab with the whole control plane running.
	time.Sleep(10 * time.Second)
	var err error
	if fig.memKiB, err = l.Memory(); err != nil {
		t.Fatal(err)
	}
	fig.log(t)

	cps := c.inv.ControlPlanes()
	var cpNames []string
	for _, n := range cps {
		cpNames = append(cpNames, n.Name)
	}
	etcdAll := c.etcd(t, ctx, cpNames...)
	members, err := etcdAll.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 3 {
		t.Errorf("%d etcd members, want 3", len(members.Members))
	}
	if n, problems := healthyMembers(ctx, etcdAll); n != 3 {
		t.Errorf("%d healthy etcd members, want 3: %v", n, problems)
	}

	vip := c.inv.Cluster.Endpoint.VIP
	for _, addr := range append([]string{vip}, cps[0].Address, cps[1].Address, cps[2].Address) {
		if err := eventually(30*time.Second, func() error { return c.readyz(ctx, addr) }); err != nil {
			t.Errorf("readyz: %v", err)
		}
	}

	// cp-1's apiserver answered first, so its keepalived took the VIP;
	// the others, at equal priority, do not preempt.
	victim := c.first
	if holders := c.vipHolders(); len(holders) != 1 || holders[0] != victim {
		t.Fatalf("VIP held by %v, want %s alone", holders, victim)
	}
	off := time.Now()
	if err := l.PowerOff(victim); err != nil {
		t.Fatal(err)
	}
	var moved []string
	err = eventually(30*time.Second, func() error {
		moved = c.vipHolders()
		if len(moved) == 1 && moved[0] != victim {
			return nil
		}
		return fmt.Errorf("VIP held by %v", moved)
	})
	if err != nil {
		t.Fatalf("after powering off %s: %v", victim, err)
	}
	t.Logf("figures: VIP moved from %s to %s in %s", victim, moved[0], time.Since(off).Round(10*time.Millisecond))
	if err := eventually(60*time.Second, func() error { return c.readyz(ctx, vip) }); err != nil {
		t.Errorf("API through the VIP after power-off: %v", err)
	}
	t.Logf("figures: API ready through the VIP %s after power-off", time.Since(off).Round(10*time.Millisecond))
	if _, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("client-go through the VIP after power-off: %v", err)
	}
	var alive []string
	for _, n := range cpNames {
		if n != victim {
			alive = append(alive, n)
		}
	}
	etcdLeft := c.etcd(t, ctx, alive...)
	err = eventually(30*time.Second, func() error {
		if n, problems := healthyMembers(ctx, etcdLeft); n != 2 {
			return fmt.Errorf("%d healthy etcd members, want 2: %v", n, problems)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}

	downLeavesNothing(t, l)
}
