package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/keepalived"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// Service is a systemd unit kept enabled and running. Its live state is
// what systemctl reports; Trigger (a checksum of the unit's config files)
// restarts it when its configuration changes.
type Service struct{}

type ServiceArgs struct {
	Connection Connection `pulumi:"connection"`
	Name       string     `pulumi:"name"`
	Trigger    string     `pulumi:"trigger,optional"`
	// KeepRunning leaves the unit enabled and running when the resource
	// goes: the container runtime, whose configuration the user takes
	// back (cluster.containerRuntime.manage: false), still runs every pod.
	KeepRunning bool `pulumi:"keepRunning,optional"`
	// ControlPlane, on a control-plane node's containerd, is waited for
	// after each restart, when it was up before: a new containerd release
	// (a package swap) need not take over the old one's sandboxes (1.6 to
	// 2.2 did not), and the kubelet then starts etcd and the apiserver
	// anew. The next node's runtime waits for this one:
	// two control-plane nodes restarting at once would cost etcd its
	// quorum.
	ControlPlane *ServiceControlPlane `pulumi:"controlPlane,optional"`
}

// ServiceControlPlane is where the node's control plane answers.
type ServiceControlPlane struct {
	Address string `pulumi:"address"`
	Port    int    `pulumi:"port"`
	// Endpoint is the controlPlaneEndpoint (host:port), through which the
	// API must answer too.
	Endpoint string `pulumi:"endpoint,optional"`
}

type ServiceState struct {
	ServiceArgs
	Enabled bool `pulumi:"enabled"`
	Active  bool `pulumi:"active"`
}

func (s *Service) Annotate(a infer.Annotator) {
	a.Describe(&s, "A systemd unit on a node, enabled and running; restarted when its trigger changes.")
	a.SetToken("index", "Service")
}

func (Service) Create(ctx context.Context, req infer.CreateRequest[ServiceArgs]) (infer.CreateResponse[ServiceState], error) {
	in := req.Inputs
	st := ServiceState{ServiceArgs: in, Enabled: true, Active: true}
	id := in.Connection.Node + ":" + in.Name
	if req.DryRun {
		return infer.CreateResponse[ServiceState]{ID: id, Output: st}, nil
	}
	return infer.CreateResponse[ServiceState]{ID: id, Output: st}, converge(ctx, in, true)
}

// converge enables the unit and (re)starts it: restart when asked (config
// changed), else start only if not running.
func converge(ctx context.Context, in ServiceArgs, restart bool) error {
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return err
	}
	defer c.Close()
	node := in.Connection.Node
	if _, err := must(ctx, c, node, "enabling "+in.Name, unitScript("enable", in.Name)); err != nil {
		return err
	}
	verb := "start"
	if restart {
		verb = "restart"
	}
	// A control plane healthy before the restart must be so after it; one
	// that was not (expired certificates, a member being revived) is
	// another step's to bring back, and the restart does not wait on it.
	wasUp := hasControlPlane(ctx, c, in) && controlPlaneWait(ctx, c, in, min(controlPlaneCheck, configOf(ctx).probes.timeout)) == nil
	if err := startUnit(ctx, c, node, in.Name, verb); err != nil {
		return err
	}
	if !wasUp {
		return nil
	}
	if err := controlPlaneWait(ctx, c, in, configOf(ctx).probes.timeout); err != nil {
		return fmt.Errorf("%s: its control plane after containerd restarted: %w", node, err)
	}
	return nil
}

// controlPlaneCheck is how long the check before a restart waits: a
// healthy control plane answers at once.
const controlPlaneCheck = 10 * time.Second

// hasControlPlane: the unit is a control-plane node's containerd
// (in.ControlPlane) and the node runs its control plane (a node yet to
// run kubeadm has none).
func hasControlPlane(ctx context.Context, c ssh.Executor, in ServiceArgs) bool {
	if in.ControlPlane == nil || in.Name != containerd.Unit {
		return false
	}
	_, err := c.Read(ctx, nodefacts.Manifest(nodefacts.KubeAPIServer))
	return err == nil
}

// controlPlaneWait waits up to wait for the node's etcd member,
// apiserver, controller-manager and scheduler to answer, and the API
// through the endpoint (waitHealthy).
func controlPlaneWait(ctx context.Context, c ssh.Executor, in ServiceArgs, wait time.Duration) error {
	pr := configOf(ctx).probes
	pr.timeout = wait
	cp := in.ControlPlane
	a := ControlPlaneAddressArgs{Connection: in.Connection, Address: cp.Address, Port: cp.Port, Endpoint: cp.Endpoint}
	return waitHealthy(withProbes(ctx, pr), c, a, settle{components: []string{nodefacts.KubeControllerManager, nodefacts.KubeScheduler}, endpoint: cp.Endpoint != ""})
}

// startUnit starts or restarts unit on node (verb), holding the endpoint
// lock for keepalived, and waits for containerd to serve again: the
// kubeadm step after it talks to the runtime at once.
func startUnit(ctx context.Context, c ssh.Executor, node, unit, verb string) error {
	err := movingEndpoint(ctx, unit, func() error {
		_, err := must(ctx, c, node, verb+"ing "+unit, unitScript(verb, unit))
		return err
	})
	if err != nil || unit != containerd.Unit {
		return err
	}
	_, err = must(ctx, c, node, "waiting for containerd", runtimeReady())
	return err
}

type runtimeReadyArgs struct{ Socket string }

// runtimeReady waits for a (re)started containerd to serve.
func runtimeReady() scripts.Script {
	return scripts.Render("containerd/ready", runtimeReadyArgs{Socket: strings.TrimPrefix(containerd.Socket, "unix://")})
}

type unitArgs struct{ Unit string }

// unitScript renders the systemd script name (enable, start, restart,
// disable, state) for unit.
func unitScript(name, unit string) scripts.Script {
	return scripts.Render("systemd/"+name, unitArgs{Unit: unit})
}

// movingEndpoint runs f, which starts or stops the unit, holding the
// endpoint lock when the unit is keepalived.
func movingEndpoint(ctx context.Context, unit string, f func() error) error {
	if unit != keepalived.Unit {
		return f()
	}
	return holdingEndpoint(ctx, f)
}

// serviceRead: a unit on a node refusing the key reads as stopped, so the
// up enables and starts it with the current key (a start of a running unit
// changes nothing).
var serviceRead = keepOrRecheck(func(st ServiceState) ServiceState {
	st.Enabled, st.Active = false, false
	return st
})

func (Service) Read(ctx context.Context, req infer.ReadRequest[ServiceArgs, ServiceState]) (infer.ReadResponse[ServiceArgs, ServiceState], error) {
	ctx = reading(ctx)
	st, err := readNode(ctx, req.State.Connection, req.State, serviceRead, func(c ssh.Executor) (ServiceState, error) {
		st := req.State
		out, _, err := query(ctx, c, unitScript("state", st.Name))
		if err != nil {
			return st, err
		}
		f := strings.Fields(out)
		st.Enabled = len(f) > 0 && f[0] == "enabled"
		st.Active = len(f) > 1 && f[1] == "active"
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[ServiceArgs, ServiceState]{}, err
	}
	return infer.ReadResponse[ServiceArgs, ServiceState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// serviceChanges: a new trigger restarts the unit; a unit found disabled
// or stopped is enabled and started; a changed connection alone touches
// nothing.
func serviceChanges(in ServiceArgs, st ServiceState) changeSet {
	d := changeSet{}
	if in.Connection.Node != st.Connection.Node || in.Name != st.Name {
		d.replace("name")
	}
	if in.Trigger != st.Trigger {
		d.update("trigger")
	}
	if !st.Enabled {
		d.update("enabled")
	}
	if !st.Active {
		d.update("active")
	}
	if in.Connection != st.Connection && !d.has("name") {
		d.update("connection")
	}
	return d
}

func (Service) Diff(ctx context.Context, req infer.DiffRequest[ServiceArgs, ServiceState]) (infer.DiffResponse, error) {
	return serviceChanges(req.Inputs, req.State).diff(true), nil
}

func (Service) Update(ctx context.Context, req infer.UpdateRequest[ServiceArgs, ServiceState]) (infer.UpdateResponse[ServiceState], error) {
	st := ServiceState{ServiceArgs: req.Inputs, Enabled: true, Active: true}
	if req.DryRun {
		return infer.UpdateResponse[ServiceState]{Output: st}, nil
	}
	d := serviceChanges(req.Inputs, req.State)
	if !d.has("trigger", "enabled", "active") {
		return infer.UpdateResponse[ServiceState]{Output: st}, nil
	}
	return infer.UpdateResponse[ServiceState]{Output: st}, converge(ctx, req.Inputs, d.has("trigger"))
}

func (Service) Delete(ctx context.Context, req infer.DeleteRequest[ServiceState]) (infer.DeleteResponse, error) {
	if req.State.KeepRunning {
		return infer.DeleteResponse{}, nil
	}
	node := req.State.Connection.Node
	c, err := dial(ctx, req.State.Connection)
	if err != nil {
		return infer.DeleteResponse{}, forgetUnreachable(ctx, node, "stopping "+req.State.Name, req.State.Name+" enabled and running", err)
	}
	defer c.Close()
	return infer.DeleteResponse{}, movingEndpoint(ctx, req.State.Name, func() error {
		_, err := must(ctx, c, node, "stopping "+req.State.Name, unitScript("disable", req.State.Name))
		return err
	})
}
