package lab

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNamesDeriveFromTheDirectory(t *testing.T) {
	if got := NamesFor(DefaultDir); got.Gateway() != "hl-gw" || got.Bridge() != "hl-br" || got.Node("cp-1") != "hl-cp-1" {
		t.Errorf("the default lab's names changed: %s %s %s", got.Gateway(), got.Bridge(), got.Node("cp-1"))
	}
	a, b := NamesFor("/srv/homelab-a"), NamesFor("/srv/homelab-b")
	if a == b || a.Prefix == defaultPrefix || b.Prefix == defaultPrefix {
		t.Errorf("two directories share names: %q %q", a.Prefix, b.Prefix)
	}
	if NamesFor("/srv/homelab-a/") != a || NamesFor("/srv/../srv/homelab-a") != a {
		t.Error("one directory spelled two ways got two names")
	}
}

func TestSlotsFollowCoresAndMemory(t *testing.T) {
	for _, c := range []struct {
		cores  int
		memory uint64
		want   int
	}{
		{2, 24 << 30, 1}, // this kind of machine: no gain from two
		{4, 24 << 30, 2},
		{16, 16 << 30, 2}, // memory-bound
		{1, 64 << 30, 1},
		{4, 2 << 30, 1}, // too little memory for one is still one
		{4, 0, 1},       // unknown memory
	} {
		if got := slotsFor(c.cores, c.memory); got != c.want {
			t.Errorf("%d cores, %d GiB: %d slots, want %d", c.cores, c.memory>>30, got, c.want)
		}
	}
	t.Setenv(EnvSlots, "0")
	if _, err := Slots(); err == nil || !strings.Contains(err.Error(), EnvSlots) {
		t.Errorf("%s=0: %v", EnvSlots, err)
	}
	t.Setenv(EnvSlots, "3")
	if n, err := Slots(); n != 3 || err != nil {
		t.Errorf("%s=3: %d, %v", EnvSlots, n, err)
	}
}

// Two labs from one inventory, brought up at the same time: the same
// subnet, addresses, node names and MACs, a real node of the same name in
// each, and still two homelabs: every node answers in its own lab with its
// own host key, nothing written in one shows in the other, pulling a cable
// in one leaves the other's node reachable, and one lab going down leaves
// the other whole. This is what lets tests run their labs side by side.
func TestTwoLabsSideBySide(t *testing.T) {
	needLab(t)
	labs := []*Lab{newTestLab(t), newTestLab(t)}
	if labs[0].Names() == labs[1].Names() {
		t.Fatalf("two labs share the names %q", labs[0].Names().Prefix)
	}
	states := make([]*State, 2)
	var wg sync.WaitGroup
	for i, l := range labs {
		l.Systemd = []string{"gpu-4"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			s, _, err := l.Up(ctx, labInventory)
			if err != nil {
				t.Errorf("lab %d up: %v", i, err)
			}
			states[i] = s
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(i int, node, cmd string) string {
		t.Helper()
		out, err := labs[i].Run(ctx, node, cmd)
		if err != nil {
			t.Fatalf("lab %d, %s: %v", i, node, err)
		}
		return strings.TrimSpace(out)
	}

	for _, node := range []string{"cp-1", "gpu-4"} {
		var keys [2]string
		for i := range labs {
			n, err := states[i].Node(node)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Fields(run(i, node, "cat "+hostKeyPath+".pub"))
			keys[i] = strings.Join(strings.Fields(n.HostKey)[:2], " ")
			if len(got) < 2 || strings.Join(got[:2], " ") != keys[i] {
				t.Errorf("lab %d: %s answered with another machine's host key %v", i, node, got)
			}
		}
		if keys[0] == keys[1] {
			t.Errorf("%s has one host key in both labs", node)
		}
	}
	a4, _ := states[0].Node("gpu-4")
	b4, _ := states[1].Node("gpu-4")
	if a4.System != SystemSystemd || b4.System != SystemSystemd {
		t.Fatalf("gpu-4 boots %q and %q, want real systemd in both", a4.System, b4.System)
	}
	for _, ca := range a4.Cgroups {
		for _, cb := range b4.Cgroups {
			if ca == cb {
				t.Errorf("both labs' gpu-4 use the cgroup %s", ca)
			}
		}
	}
	for i := range labs {
		if out, err := labs[i].Run(ctx, "gpu-4", "systemctl is-system-running --wait"); strings.TrimSpace(out) != "running" {
			t.Errorf("lab %d: gpu-4's systemd is %q (%v)", i, strings.TrimSpace(out), err)
		}
	}

	mark := "/root/side-by-side-" + randomHex(4)
	run(0, "cp-1", "touch "+mark)
	if out := run(1, "cp-1", "test -e "+mark+" && echo visible || echo absent"); out != "absent" {
		t.Errorf("a file written on lab 0's cp-1 is %s on lab 1's", out)
	}

	if err := labs[0].Cut("cp-2"); err != nil {
		t.Fatal(err)
	}
	if got := run(1, "cp-2", "hostname"); got != "cp-2" {
		t.Errorf("lab 1's cp-2 after lab 0's cable was pulled: %q", got)
	}

	downLeavesNothing(t, labs[0])
	for _, n := range states[1].Nodes {
		if got := run(1, n.Name, "hostname"); got != n.Name {
			t.Errorf("lab 1's %s after lab 0 went down: %q", n.Name, got)
		}
	}
	downLeavesNothing(t, labs[1])
}
