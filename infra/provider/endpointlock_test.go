package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/upgradeplan"
	"github.com/homelab-dev/homelab/roles/keepalived"
)

// An upgrade's control-plane step holds the endpoint lock from its first
// command to its end, failure included.
func TestUpgradeStepHoldsTheEndpoint(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	in.Target = "v1.35.4"
	u := &upgrader{in: in, conns: map[string]Connection{}}
	for _, c := range append(in.ControlPlanes, in.Workers...) {
		u.conns[c.Node] = c
	}
	endpointHolders := l.config().endpoint
	held := false
	l.node("cp-2").onScriptWithFunc("detached/start", runsDir+"/"+aptRun, func(string) (ssh.Result, error) {
		if endpointHolders.TryLock() {
			endpointHolders.Unlock()
		} else {
			held = true
		}
		return ssh.Result{Stderr: []byte("E: Could not get lock /var/lib/dpkg/lock-frontend\n"), ExitCode: 100}, nil
	})
	err := u.step(l.ctx(), upgradeplan.Step{Action: upgradeplan.ControlPlane, Nodes: []string{"cp-2"}})
	if err == nil || !strings.Contains(err.Error(), "lock-frontend") {
		t.Fatalf("the failing install: %v", err)
	}
	if !held {
		t.Error("cp-2's upgrade ran without the endpoint lock")
	}
	if !endpointHolders.TryLock() {
		t.Fatal("the failed step left the endpoint lock held")
	}
	endpointHolders.Unlock()
}

// keepalived starts, restarts and stops wait while the endpoint lock is
// held (an upgrade has handed the VIP over); other units do not.
func TestKeepalivedWaitsForTheEndpoint(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	endpointHolders := lab.config().endpoint
	ka := serveUnit(lab.node("cp-2"), keepalived.Unit)
	ka.enabled, ka.active = true, true
	ct := serveUnit(lab.node("gpu-1"), "containerd")
	ct.enabled, ct.active = true, true
	kaIn := ServiceArgs{Connection: lab.conn("cp-2"), Name: keepalived.Unit, Trigger: "t2"}
	ctIn := ServiceArgs{Connection: lab.conn("gpu-1"), Name: "containerd", Trigger: "t2"}
	state := func(in ServiceArgs) ServiceState {
		in.Trigger = "t1"
		return ServiceState{ServiceArgs: in, Enabled: true, Active: true}
	}
	restarts := func(u *fakeUnit) int {
		lab.mu.Lock()
		defer lab.mu.Unlock()
		return u.restarts
	}

	endpointHolders.Lock()
	done := make(chan error)
	go func() {
		_, err := (Service{}).Update(ctx, infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: kaIn, State: state(kaIn)})
		done <- err
	}()
	if _, err := (Service{}).Update(ctx, infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: ctIn, State: state(ctIn)}); err != nil {
		t.Fatal(err)
	}
	if restarts(ct) != 1 {
		t.Error("containerd's restart waited for the endpoint lock")
	}
	select {
	case err := <-done:
		t.Fatalf("keepalived's update ended while the lock was held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if restarts(ka) != 0 {
		t.Error("keepalived restarted while the upgrade held the endpoint")
	}
	endpointHolders.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if restarts(ka) != 1 {
		t.Errorf("keepalived was not restarted once the lock was free: %d restarts", restarts(ka))
	}

	endpointHolders.Lock()
	go func() {
		_, err := (Service{}).Delete(ctx, infer.DeleteRequest[ServiceState]{ID: "id", State: state(kaIn)})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("keepalived's stop ended while the lock was held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	endpointHolders.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A Ctrl-C while the node has handed the VIP over (its control plane
// being upgraded) still starts its keepalived again: the node is back in
// VRRP when the up stops, not at the next one.
func TestCancelDuringHandOverStartsKeepalivedAgain(t *testing.T) {
	l, in := upgradeLab(t, "v1.34.4")
	u := &upgrader{in: in, conns: map[string]Connection{}}
	for _, c := range in.ControlPlanes {
		u.conns[c.Node] = c
	}
	cp2 := l.node("cp-2")
	cp2.onScript("vip/holds", "holds\n", 0)
	cp2.onScript("systemd/stop", "", 0)
	cp2.onScript("systemd/start", "", 0)
	ctx, cancel := context.WithCancel(l.ctx())
	defer cancel()
	ex, err := dial(ctx, u.conns["cp-2"])
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	err = withVIPHandedOver(ctx, ex, "cp-2", u.in.Endpoint, u.conns["cp-2"].Host, "its control plane is upgraded", func() error {
		cancel() // the user's first Ctrl-C, mid hand-over
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled step: %v", err)
	}
	var stopped, started int
	for _, e := range cp2.events {
		name, _ := scripts.NameOf(e.cmd)
		switch {
		case name == "systemd/stop" && strings.Contains(e.cmd, "'keepalived'"):
			stopped = e.seq
		case name == "systemd/start" && strings.Contains(e.cmd, "'keepalived'"):
			started = e.seq
		}
	}
	if stopped == 0 || started < stopped {
		t.Errorf("keepalived stopped at %d, started again at %d: the node stays out of VRRP", stopped, started)
	}
}
