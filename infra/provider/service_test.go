package provider

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/apiprobe"
	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// fakeUnit emulates systemctl for one unit on a node: enable, start,
// restart and disable --now change what is-enabled and is-active say.
type fakeUnit struct {
	enabled, active bool
	restarts        int
	// loadFails is containerd failing on its configuration.
	loadFails bool
}

func serveUnit(n *fakeNode, name string) *fakeUnit {
	u := &fakeUnit{}
	q := shell.Quote(name)
	word := func(b bool, yes, no string) string {
		if b {
			return yes
		}
		return no
	}
	// Each script answers for this unit only.
	serve := func(script string, f func()) {
		n.onScriptFunc(script, func(cmd string) (ssh.Result, error) {
			if !strings.HasSuffix(cmd, " "+q+"\n") {
				n.t.Errorf("%s: %s of another unit than %s: %q", n.name, script, name, cmd)
				return ssh.Result{ExitCode: 5}, nil
			}
			f()
			return ssh.Result{}, nil
		})
	}
	n.onScriptFunc("systemd/state", func(cmd string) (ssh.Result, error) {
		if !strings.Contains(cmd, "unit="+q+"\n") {
			n.t.Errorf("%s: the state of another unit than %s: %q", n.name, name, cmd)
		}
		return ssh.Result{Stdout: []byte(word(u.enabled, "enabled", "disabled") + "\n" + word(u.active, "active", "inactive") + "\n"), ExitCode: 3}, nil
	})
	serve("systemd/enable", func() { u.enabled = true })
	serve("systemd/start", func() { u.active = true })
	serve("systemd/restart", func() { u.active = true; u.restarts++ })
	serve("systemd/disable", func() { u.enabled, u.active = false, false })
	if name == containerd.Unit {
		n.onScriptFunc("containerd/ready", func(string) (ssh.Result, error) {
			if !u.active || u.loadFails {
				return ssh.Result{Stderr: []byte("containerd does not serve on /run/containerd/containerd.sock after its restart:\n" +
					"containerd: failed to load TOML from /etc/containerd/config.toml\n"), ExitCode: 1}, nil
			}
			return ssh.Result{}, nil
		})
	}
	return u
}

// scriptSteps is what changed n, in order: "upload PATH", or a script's
// name with its last line ("systemd/enable: systemctl enable 'x'").
func scriptSteps(n *fakeNode) []string {
	var out []string
	for _, e := range n.events {
		if !e.mutating {
			continue
		}
		if e.kind == "upload" {
			out = append(out, "upload "+e.cmd)
			continue
		}
		name, ok := scripts.NameOf(e.cmd)
		if !ok {
			name = "(no script)"
		}
		lines := strings.Split(strings.TrimSpace(e.cmd), "\n")
		out = append(out, name+": "+lines[len(lines)-1])
	}
	return out
}

func TestServiceLifecycle(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	n := lab.node("gpu-1")
	unit := serveUnit(n, "containerd")
	in := ServiceArgs{Connection: lab.conn("gpu-1"), Name: "containerd", Trigger: "t1"}

	created, err := (Service{}).Create(ctx, infer.CreateRequest[ServiceArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"systemd/enable: systemctl enable 'containerd'", "systemd/restart: systemctl restart 'containerd'", "containerd/ready: exit 1"}; !slices.Equal(scriptSteps(n), want) {
		t.Errorf("create did %v", scriptSteps(n))
	}
	st := refresh(t, ctx, Service{}, in, created.Output)
	if !st.Enabled || !st.Active {
		t.Errorf("read back %+v", st)
	}
	if d := diffKeys(t, Service{}, in, st); len(d) > 0 {
		t.Errorf("a running unit shows changes: %v", d)
	}

	// Stopped by hand: started, not restarted.
	unit.active = false
	st = refresh(t, ctx, Service{}, in, st)
	if d := diffKeys(t, Service{}, in, st); !slices.Equal(d, []string{"active"}) {
		t.Errorf("a stopped unit shows %v", d)
	}
	n.reset()
	if _, err := (Service{}).Update(ctx, infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: in, State: st}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"systemd/enable: systemctl enable 'containerd'", "systemd/start: systemctl start 'containerd'", "containerd/ready: exit 1"}; !slices.Equal(scriptSteps(n), want) || !unit.active {
		t.Errorf("repair did %v", scriptSteps(n))
	}

	// Its configuration changed: restarted.
	st = refresh(t, ctx, Service{}, in, st)
	changed := in
	changed.Trigger = "t2"
	n.reset()
	before := unit.restarts
	if _, err := (Service{}).Update(ctx, infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: changed, State: st}); err != nil {
		t.Fatal(err)
	}
	if unit.restarts != before+1 {
		t.Errorf("a new trigger did %v", n.mutations())
	}

	// Nothing to do: the node is not touched, not even read.
	n.reset()
	rekeyed := in
	rekeyed.Connection.PrivateKey = "key-2"
	if _, err := (Service{}).Update(ctx, infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: rekeyed, State: st}); err != nil || n.dials != 0 {
		t.Errorf("a new key alone: %v, %v", err, n.events)
	}

	if _, err := (Service{}).Delete(ctx, infer.DeleteRequest[ServiceState]{ID: "id", State: st}); err != nil {
		t.Fatal(err)
	}
	if unit.enabled || unit.active {
		t.Errorf("delete left the unit enabled %v active %v", unit.enabled, unit.active)
	}
}

// The container runtime: a restart waits until containerd serves again, a
// configuration it cannot load fails the step with containerd's words,
// and the resource's deletion (the runtime handed back to the user)
// leaves it running.
func TestRuntimeService(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	n := lab.node("gpu-1")
	unit := serveUnit(n, containerd.Unit)
	in := ServiceArgs{Connection: lab.conn("gpu-1"), Name: containerd.Unit, Trigger: "t1", KeepRunning: true}
	unit.loadFails = true
	if _, err := (Service{}).Create(ctx, infer.CreateRequest[ServiceArgs]{Inputs: in}); err == nil || !strings.Contains(err.Error(), "failed to load TOML") {
		t.Errorf("a config containerd cannot load: %v", err)
	}
	unit.loadFails = false
	created, err := (Service{}).Create(ctx, infer.CreateRequest[ServiceArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	n.reset()
	if _, err := (Service{}).Delete(ctx, infer.DeleteRequest[ServiceState]{ID: "id", State: created.Output}); err != nil {
		t.Fatal(err)
	}
	if !unit.enabled || !unit.active || len(n.mutations()) > 0 {
		t.Errorf("deleting a kept runtime: enabled %v active %v, did %v", unit.enabled, unit.active, n.mutations())
	}
}

func TestServiceFails(t *testing.T) {
	lab := newFakeLab(t)
	n := lab.node("cp-1")
	n.onScriptFunc("systemd/enable", func(string) (ssh.Result, error) {
		return ssh.Result{Stderr: []byte("Failed to enable unit: Unit file keepalived.service does not exist.\n"), ExitCode: 1}, nil
	})
	_, err := (Service{}).Create(lab.ctx(), infer.CreateRequest[ServiceArgs]{Inputs: ServiceArgs{Connection: lab.conn("cp-1"), Name: "keepalived"}})
	if err == nil || !strings.Contains(err.Error(), "does not exist") || n.ran("systemd/restart") > 0 {
		t.Errorf("enabling a missing unit: %v, then %v", err, n.mutations())
	}
}

func TestServiceUnreadable(t *testing.T) {
	lab := newFakeLab(t)
	in := ServiceArgs{Connection: lab.conn("cp-1"), Name: "kubelet"}
	running := ServiceState{ServiceArgs: in, Enabled: true, Active: true}
	lab.node("cp-1").dialErr = unreachableErr("cp-1")
	if st := refresh(t, lab.ctx(), Service{}, in, running); st != running {
		t.Errorf("an unreachable node's unit: %+v", st)
	}
	lab.node("cp-1").dialErr = keyRefusedErr("cp-1")
	st := refresh(t, lab.ctx(), Service{}, in, running)
	if d := diffKeys(t, Service{}, in, st); !slices.Equal(d, []string{"active", "enabled"}) {
		t.Errorf("a node refusing the key: %v", d)
	}
}

// Stopping a unit on a node that cannot be reached would forget it while
// it runs on: only with consent.
func TestServiceDeleteUnreachable(t *testing.T) {
	lab := newFakeLab(t)
	st := ServiceState{ServiceArgs: ServiceArgs{Connection: lab.conn("gpu-3"), Name: "kubelet"}}
	lab.node("gpu-3").dialErr = unreachableErr("gpu-3")
	_, err := (Service{}).Delete(lab.ctx(), infer.DeleteRequest[ServiceState]{ID: "id", State: st})
	if err == nil || !strings.Contains(err.Error(), RefusedMarker) {
		t.Errorf("without consent: %v", err)
	}
	lab.config().allowDestroy = "gpu-3"
	if _, err := (Service{}).Delete(lab.ctx(), infer.DeleteRequest[ServiceState]{ID: "id", State: st}); err != nil {
		t.Errorf("with consent: %v", err)
	}
}

// A control-plane node's containerd: after its restart the step waits for
// the node's etcd member and apiserver (and controller-manager and
// scheduler) to answer, since a new containerd release starts every pod
// anew; a node whose control plane is not there yet (before kubeadm init)
// is not waited for, and neither is a worker's.
func TestRuntimeServiceWaitsForTheControlPlane(t *testing.T) {
	lab := newFakeLab(t)
	n := lab.node("cp-1")
	serveUnit(n, containerd.Unit)
	ctx := withProbes(lab.ctx(), fakeProbes(nil))
	in := ServiceArgs{Connection: lab.conn("cp-1"), Name: containerd.Unit, Trigger: "t1", KeepRunning: true,
		ControlPlane: &ServiceControlPlane{Address: "10.0.0.11", Port: 6443, Endpoint: "10.0.0.100:6443"}}
	created, err := (Service{}).Create(ctx, infer.CreateRequest[ServiceArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if p := n.probed(); len(p) != 0 {
		t.Errorf("waited for a control plane the node does not run yet: %v", p)
	}
	n.put(nodefacts.Manifest(nodefacts.KubeAPIServer), "kind: Pod\n", 0o600)
	n.put(nodefacts.CACert, "", 0o644)
	n.reset()
	next := in
	next.Trigger = "t2"
	if _, err := (Service{}).Update(ctx, infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: next, State: created.Output}); err != nil {
		t.Fatal(err)
	}
	probed := strings.Join(n.probed(), "; ")
	for _, want := range []string{"etcd", "readyz 10.0.0.11:6443", "readyz 10.0.0.100:6443"} {
		if !strings.Contains(probed, want) {
			t.Errorf("after containerd restarted, the step did not wait for %q: %s", want, probed)
		}
	}
	// A control plane down before the restart (expired certificates, a
	// member being revived) is another step's: the restart goes ahead
	// and does not wait on it.
	down := fakeProbes(nil)
	down.readyz = func(context.Context, ssh.Executor, apiprobe.Readyz, string) error {
		return errors.New("connection refused")
	}
	down.timeout = 50 * time.Millisecond
	n.reset()
	after := next
	after.Trigger = "t3"
	if _, err := (Service{}).Update(withProbes(lab.ctx(), down), infer.UpdateRequest[ServiceArgs, ServiceState]{Inputs: after, State: created.Output}); err != nil {
		t.Errorf("a restart under a control plane already down: %v", err)
	}
	if !n.asked("restart") {
		t.Error("containerd was not restarted under a control plane already down")
	}
	w := lab.node("gpu-1")
	serveUnit(w, containerd.Unit)
	w.put(nodefacts.Manifest(nodefacts.KubeAPIServer), "kind: Pod\n", 0o600)
	if _, err := (Service{}).Create(ctx, infer.CreateRequest[ServiceArgs]{Inputs: ServiceArgs{Connection: lab.conn("gpu-1"), Name: containerd.Unit, Trigger: "t1"}}); err != nil || len(w.probed()) != 0 {
		t.Errorf("a worker's containerd: %v, probed %v", err, w.probed())
	}
}
