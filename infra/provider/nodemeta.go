package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// NodeMeta keeps a Node's labels and taints as the inventory declares them,
// applied through the API (kubectl on a control-plane node), so re-applying
// never loses them and a label edited away by hand comes back.
type NodeMeta struct{}

type Taint struct {
	Key    string `pulumi:"key"`
	Value  string `pulumi:"value,optional"`
	Effect string `pulumi:"effect"`
}

type NodeMetaArgs struct {
	// Via is a control-plane node with admin.conf.
	Via    Connection        `pulumi:"via"`
	Node   string            `pulumi:"node"`
	Labels map[string]string `pulumi:"labels,optional"`
	Taints []Taint           `pulumi:"taints,optional"`
	// Machine is the node's host key fingerprint as known_hosts has it
	// (accepting a replaced machine's key changes it): a new machine registers
	// a new Node, which starts without the labels a kubelet may not set
	// itself, so they are applied again.
	Machine string `pulumi:"machine,optional"`
}

type NodeMetaState struct {
	NodeMetaArgs
	// LiveLabels and LiveTaints are the managed keys' values on the Node.
	LiveLabels map[string]string `pulumi:"liveLabels,optional"`
	LiveTaints []Taint           `pulumi:"liveTaints,optional"`
}

func (n *NodeMeta) Annotate(a infer.Annotator) {
	a.Describe(&n, "Labels and taints of a Node, kept as declared.")
	a.SetToken("index", "NodeMeta")
}

type nodeJSON struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Taints []struct{ Key, Value, Effect string } `json:"taints"`
	} `json:"spec"`
}

func (NodeMeta) Create(ctx context.Context, req infer.CreateRequest[NodeMetaArgs]) (infer.CreateResponse[NodeMetaState], error) {
	in := req.Inputs
	st := NodeMetaState{NodeMetaArgs: in, LiveLabels: in.Labels, LiveTaints: in.Taints}
	if req.DryRun {
		return infer.CreateResponse[NodeMetaState]{ID: in.Node, Output: st}, nil
	}
	return infer.CreateResponse[NodeMetaState]{ID: in.Node, Output: st}, applyMeta(ctx, in, NodeMetaArgs{})
}

// applyMeta sets the declared labels and taints and removes those the
// previous declaration had and this one dropped. It waits for the Node to
// register (a kubelet does so seconds after join), asking through the
// read batch: the NodeMetas of nodes that joined together wait on one
// kubectl run on the via node rather than one each.
func applyMeta(ctx context.Context, in, old NodeMetaArgs) error {
	c, err := dial(ctx, in.Via)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, found, err := configOf(ctx).batches.nodes.get(ctx, in.Via, c, in.Node)
		if found {
			break
		}
		// The API not answering for a moment (an apiserver restarting
		// behind the endpoint) is waited out like a Node not there yet.
		var refused *apiRefused
		if err != nil && !errors.As(err, &refused) {
			return err
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("Node %s: the API did not answer through %s for 2 minutes: %w", in.Node, in.Via.Node, err)
			}
			return fmt.Errorf("Node %s did not register within 2 minutes: is its kubelet running?", in.Node)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	meta := metaChanges(in, old)
	if len(meta.Labels) == 0 && len(meta.DropTaints) == 0 && len(meta.Taints) == 0 {
		return nil
	}
	_, err = mustAPI(ctx, c, in.Via.Node, "labelling and tainting "+in.Node, scripts.Render("kubectl/node-meta", meta))
	return err
}

type nodeArgs struct{ Kubectl, Node string }

// nodeMetaArgs are kubectl/node-meta's: kubectl's own arguments, one word
// each.
type nodeMetaArgs struct {
	Kubectl, Node string
	// Labels: key=value to set, key- for one the declaration dropped.
	Labels []string
	// DropTaints (key:effect-) are the taints the declaration dropped,
	// Taints (key[=value]:effect) those it has.
	DropTaints, Taints []string
}

// metaChanges sets every declared label and taint (an idempotent
// overwrite) and removes those old declared and in no longer does.
func metaChanges(in, old NodeMetaArgs) nodeMetaArgs {
	a := nodeMetaArgs{Kubectl: kubectl, Node: in.Node}
	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		a.Labels = append(a.Labels, k+"="+in.Labels[k])
	}
	for _, k := range slices.Sorted(maps.Keys(old.Labels)) {
		if _, keep := in.Labels[k]; !keep {
			a.Labels = append(a.Labels, k+"-")
		}
	}
	for _, t := range old.Taints {
		if !slices.Contains(in.Taints, t) {
			a.DropTaints = append(a.DropTaints, t.Key+":"+t.Effect+"-")
		}
	}
	for _, t := range in.Taints {
		spec := t.Key
		if t.Value != "" {
			spec += "=" + t.Value
		}
		a.Taints = append(a.Taints, spec+":"+t.Effect)
	}
	return a
}

// nodeMetaRead: labels and taints read through a node refusing the key
// are unknown, so the up applies them again (an idempotent overwrite). A
// Node that cannot be read at all keeps its last known labels, whatever
// went wrong on the way (the API down while Via is rebuilt, a reply that
// does not parse): none of that says the labels went.
var nodeMetaRead = keepOrRecheck(func(st NodeMetaState) NodeMetaState {
	st.LiveLabels, st.LiveTaints = nil, nil
	return st
})

func (NodeMeta) Read(ctx context.Context, req infer.ReadRequest[NodeMetaArgs, NodeMetaState]) (infer.ReadResponse[NodeMetaArgs, NodeMetaState], error) {
	ctx = reading(ctx)
	last := req.State
	last.Via = currentVia(last.Via, req.Inputs.Via)
	st, err := readNode(ctx, last.Via, last, nodeMetaRead, func(c ssh.Executor) (NodeMetaState, error) {
		st := last
		n, _, err := configOf(ctx).batches.nodes.get(ctx, last.Via, c, st.Node)
		if err != nil {
			return st, unanswered(fmt.Errorf("%s: %w", last.Via.Node, err))
		}
		st.LiveLabels, st.LiveTaints = map[string]string{}, nil
		if n != nil {
			for k := range st.Labels {
				if v, ok := n.Metadata.Labels[k]; ok {
					st.LiveLabels[k] = v
				}
			}
			for _, t := range n.Spec.Taints {
				lt := Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
				if slices.Contains(st.Taints, lt) {
					st.LiveTaints = append(st.LiveTaints, lt)
				}
			}
		}
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[NodeMetaArgs, NodeMetaState]{}, err
	}
	return infer.ReadResponse[NodeMetaArgs, NodeMetaState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

func taintKeys(ts []Taint) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key+"="+t.Value+":"+t.Effect)
	}
	sort.Strings(out)
	return out
}

// nodeMetaChanges compares the declaration with both the Node's live
// values and the last declaration: a label edited away by hand comes back,
// and one dropped from the inventory is removed (applyMeta needs the old
// declaration for that). A new machine registers a new Node, which lacks
// the labels a kubelet may not set itself.
func nodeMetaChanges(in NodeMetaArgs, st NodeMetaState) changeSet {
	d := changeSet{}
	if in.Node != st.Node {
		d.replace("node")
	}
	if !maps.Equal(in.Labels, st.LiveLabels) || !maps.Equal(in.Labels, st.Labels) {
		d.update("labels")
	}
	if !slices.Equal(taintKeys(in.Taints), taintKeys(st.LiveTaints)) || !slices.Equal(taintKeys(in.Taints), taintKeys(st.Taints)) {
		d.update("taints")
	}
	if in.Machine != st.Machine {
		d.update("machine")
	}
	return d
}

func (NodeMeta) Diff(ctx context.Context, req infer.DiffRequest[NodeMetaArgs, NodeMetaState]) (infer.DiffResponse, error) {
	return nodeMetaChanges(req.Inputs, req.State).diff(false), nil
}

func (NodeMeta) Update(ctx context.Context, req infer.UpdateRequest[NodeMetaArgs, NodeMetaState]) (infer.UpdateResponse[NodeMetaState], error) {
	in, old := req.Inputs, req.State
	st := NodeMetaState{NodeMetaArgs: in, LiveLabels: in.Labels, LiveTaints: in.Taints}
	if req.DryRun || !nodeMetaChanges(in, old).has("labels", "taints", "machine") {
		return infer.UpdateResponse[NodeMetaState]{Output: st}, nil
	}
	return infer.UpdateResponse[NodeMetaState]{Output: st}, applyMeta(ctx, in, old.NodeMetaArgs)
}

// Delete leaves the Node alone: the join's delete removes the Node itself.
func (NodeMeta) Delete(ctx context.Context, req infer.DeleteRequest[NodeMetaState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}
