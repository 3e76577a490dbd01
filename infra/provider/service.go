package provider

import (
	"context"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// Service is a systemd unit kept enabled and running. Its live state is
// what systemctl reports; Trigger (a checksum of the unit's config files)
// restarts it when its configuration changes.
type Service struct{}

type ServiceArgs struct {
	Connection Connection `pulumi:"connection"`
	Name       string     `pulumi:"name"`
	Trigger    string     `pulumi:"trigger,optional"`
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
	node, unit := in.Connection.Node, quote(in.Name)
	if _, err := must(ctx, c, node, "enabling "+in.Name, "systemctl enable "+unit); err != nil {
		return err
	}
	verb := "start"
	if restart {
		verb = "restart"
	}
	_, err = must(ctx, c, node, verb+"ing "+in.Name, "systemctl "+verb+" "+unit)
	return err
}

func (Service) Read(ctx context.Context, req infer.ReadRequest[ServiceArgs, ServiceState]) (infer.ReadResponse[ServiceArgs, ServiceState], error) {
	ctx = reading(ctx)
	st := req.State
	c, err := dial(ctx, st.Connection)
	if err != nil {
		if !unreachable(ctx, st.Connection.Node, err) {
			st.Enabled, st.Active = false, false
		}
		return infer.ReadResponse[ServiceArgs, ServiceState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
	}
	defer c.Close()
	out, _, err := query(ctx, c, "systemctl is-enabled "+quote(st.Name)+"; systemctl is-active "+quote(st.Name))
	if err != nil {
		return infer.ReadResponse[ServiceArgs, ServiceState]{}, err
	}
	f := strings.Fields(out)
	st.Enabled = len(f) > 0 && f[0] == "enabled"
	st.Active = len(f) > 1 && f[1] == "active"
	return infer.ReadResponse[ServiceArgs, ServiceState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

func (Service) Diff(ctx context.Context, req infer.DiffRequest[ServiceArgs, ServiceState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}
	in, st := req.Inputs, req.State
	if in.Connection.Node != st.Connection.Node || in.Name != st.Name {
		d["name"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}
	if in.Trigger != st.Trigger {
		d["trigger"] = p.PropertyDiff{Kind: p.Update}
	}
	if !st.Enabled {
		d["enabled"] = p.PropertyDiff{Kind: p.Update}
	}
	if !st.Active {
		d["active"] = p.PropertyDiff{Kind: p.Update}
	}
	if in.Connection != st.Connection && d["name"].Kind == "" {
		d["connection"] = p.PropertyDiff{Kind: p.Update}
	}
	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d, DeleteBeforeReplace: true}, nil
}

func (Service) Update(ctx context.Context, req infer.UpdateRequest[ServiceArgs, ServiceState]) (infer.UpdateResponse[ServiceState], error) {
	st := ServiceState{ServiceArgs: req.Inputs, Enabled: true, Active: true}
	if req.DryRun {
		return infer.UpdateResponse[ServiceState]{Output: st}, nil
	}
	old := req.State
	if req.Inputs.Trigger == old.Trigger && old.Enabled && old.Active {
		return infer.UpdateResponse[ServiceState]{Output: st}, nil
	}
	return infer.UpdateResponse[ServiceState]{Output: st}, converge(ctx, req.Inputs, req.Inputs.Trigger != old.Trigger)
}

func (Service) Delete(ctx context.Context, req infer.DeleteRequest[ServiceState]) (infer.DeleteResponse, error) {
	node := req.State.Connection.Node
	c, err := dial(ctx, req.State.Connection)
	if err != nil {
		return infer.DeleteResponse{}, forgetUnreachable(ctx, node, "stopping "+req.State.Name, req.State.Name+" enabled and running", err)
	}
	defer c.Close()
	_, err = must(ctx, c, node, "stopping "+req.State.Name, "systemctl disable --now "+quote(req.State.Name))
	return infer.DeleteResponse{}, err
}
