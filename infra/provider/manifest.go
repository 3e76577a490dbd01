package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// Manifest is a cluster object applied with kubectl on a control-plane
// node (the RuntimeClass, for one). Live state: whether it exists.
type Manifest struct{}

type ManifestArgs struct {
	Via  Connection `pulumi:"via"`
	Kind string     `pulumi:"kind"`
	Name string     `pulumi:"name"`
	// Namespace is the object's namespace; empty for cluster-scoped kinds.
	Namespace string `pulumi:"namespace,optional"`
	Content   string `pulumi:"content"`
}

// manifestArgs are the manifest scripts': the object, by kind, name and
// namespace (empty for a cluster-scoped kind).
type manifestArgs struct{ Kubectl, Kind, Name, Namespace string }

// script renders the manifest script name (apply, get, delete) for m's
// object.
func (m ManifestArgs) script(name string) scripts.Script {
	return scripts.Render("manifest/"+name, manifestArgs{Kubectl: kubectl, Kind: m.Kind, Name: m.Name, Namespace: m.Namespace})
}

type ManifestState struct {
	ManifestArgs
	Exists bool `pulumi:"exists"`
}

func (m *Manifest) Annotate(a infer.Annotator) {
	a.Describe(&m, "A Kubernetes object applied with kubectl on a control-plane node.")
	a.SetToken("index", "Manifest")
}

func applyManifest(ctx context.Context, in ManifestArgs) error {
	c, err := dial(ctx, in.Via)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.RunInput(ctx, in.script("apply").String(), []byte(in.Content))
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("%s: applying %s/%s: %s", in.Via.Node, in.Kind, in.Name, r.Stderr)
	}
	return nil
}

func (Manifest) Create(ctx context.Context, req infer.CreateRequest[ManifestArgs]) (infer.CreateResponse[ManifestState], error) {
	st := ManifestState{ManifestArgs: req.Inputs, Exists: true}
	id := req.Inputs.Kind + "/" + req.Inputs.Name
	if req.DryRun {
		return infer.CreateResponse[ManifestState]{ID: id, Output: st}, nil
	}
	return infer.CreateResponse[ManifestState]{ID: id, Output: st}, applyManifest(ctx, req.Inputs)
}

// manifestRead: an object read through a node refusing the key is
// unknown, so the up applies it again (kubectl apply of the same content
// changes nothing). An API that does not answer keeps the last state: the
// object is the cluster's, not the node's, and a control plane being
// repaired says nothing about it.
var manifestRead = keepOrRecheck(func(st ManifestState) ManifestState {
	st.Exists = false
	return st
})

func (Manifest) Read(ctx context.Context, req infer.ReadRequest[ManifestArgs, ManifestState]) (infer.ReadResponse[ManifestArgs, ManifestState], error) {
	ctx = reading(ctx)
	last := req.State
	last.Via = currentVia(last.Via, req.Inputs.Via)
	st, err := readNode(ctx, last.Via, last, manifestRead, func(c ssh.Executor) (ManifestState, error) {
		st := last
		out, err := queryAPI(ctx, c, st.script("get"))
		var refused *apiRefused
		if errors.As(err, &refused) {
			return st, unanswered(fmt.Errorf("its API: %w", err))
		}
		if err != nil {
			return st, err
		}
		st.Exists = strings.TrimSpace(out) != ""
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[ManifestArgs, ManifestState]{}, err
	}
	return infer.ReadResponse[ManifestArgs, ManifestState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// manifestChanges: the object is applied again when its content changed
// or it is gone from the cluster.
func manifestChanges(in ManifestArgs, st ManifestState) changeSet {
	d := changeSet{}
	if in.Kind != st.Kind || in.Name != st.Name || in.Namespace != st.Namespace {
		d.replace("name")
	}
	if in.Content != st.Content || !st.Exists {
		d.update("content")
	}
	return d
}

func (Manifest) Diff(ctx context.Context, req infer.DiffRequest[ManifestArgs, ManifestState]) (infer.DiffResponse, error) {
	return manifestChanges(req.Inputs, req.State).diff(true), nil
}

func (Manifest) Update(ctx context.Context, req infer.UpdateRequest[ManifestArgs, ManifestState]) (infer.UpdateResponse[ManifestState], error) {
	st := ManifestState{ManifestArgs: req.Inputs, Exists: true}
	if req.DryRun || !manifestChanges(req.Inputs, req.State).has("content") {
		return infer.UpdateResponse[ManifestState]{Output: st}, nil
	}
	return infer.UpdateResponse[ManifestState]{Output: st}, applyManifest(ctx, req.Inputs)
}

func (Manifest) Delete(ctx context.Context, req infer.DeleteRequest[ManifestState]) (infer.DeleteResponse, error) {
	st := req.State
	c, err := dial(ctx, st.Via)
	if err != nil {
		// Forgetting it loses nothing: the cluster keeps the object.
		logUnread(ctx, st.Via.Node, err, st.Kind+"/"+st.Name+" is left in the cluster")
		return infer.DeleteResponse{}, nil
	}
	defer c.Close()
	// Only an SSH failure fails the destroy: an object kubectl could not
	// delete is left in the cluster, as when the node does not answer.
	_, err = c.Run(ctx, st.script("delete").String())
	return infer.DeleteResponse{}, err
}
