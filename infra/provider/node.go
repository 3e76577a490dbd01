package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
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

func readNode(ctx context.Context, in NodeMetaArgs) (*nodeJSON, error) {
	c, err := dial(ctx, in.Via)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out, code, err := query(ctx, c, kubectl+" get node "+quote(in.Node)+" -o json --ignore-not-found")
	if err != nil {
		return nil, err
	}
	if code != 0 {
		// The API is not there (Via is being rebuilt): unknown, not absent.
		return nil, fmt.Errorf("%s: reading Node %s failed (exit %d)", in.Via.Node, in.Node, code)
	}
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	var n nodeJSON
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		return nil, fmt.Errorf("reading Node %s: %w", in.Node, err)
	}
	return &n, nil
}

// applyMeta sets the declared labels and taints and removes those the
// previous declaration had and this one dropped. It waits for the Node to
// register (a kubelet does so seconds after join).
func applyMeta(ctx context.Context, in, old NodeMetaArgs) error {
	c, err := dial(ctx, in.Via)
	if err != nil {
		return err
	}
	defer c.Close()
	name := quote(in.Node)
	wait := kubectl + " get node " + name + " >/dev/null"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, code, err := query(ctx, c, wait)
		if err != nil {
			return err
		}
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Node %s did not register within 2 minutes: is its kubelet running?", in.Node)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(in.Labels)) {
		labels = append(labels, quote(k+"="+in.Labels[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(old.Labels)) {
		if _, keep := in.Labels[k]; !keep {
			labels = append(labels, quote(k+"-"))
		}
	}
	var cmds []string
	if len(labels) > 0 {
		cmds = append(cmds, kubectl+" label node "+name+" --overwrite "+strings.Join(labels, " "))
	}
	for _, t := range old.Taints {
		if !slices.Contains(in.Taints, t) {
			cmds = append(cmds, kubectl+" taint node "+name+" "+quote(t.Key+":"+t.Effect+"-")+" || true")
		}
	}
	for _, t := range in.Taints {
		spec := t.Key
		if t.Value != "" {
			spec += "=" + t.Value
		}
		cmds = append(cmds, kubectl+" taint node "+name+" --overwrite "+quote(spec+":"+t.Effect))
	}
	if len(cmds) == 0 {
		return nil
	}
	_, err = must(ctx, c, in.Via.Node, "labelling and tainting "+in.Node, strings.Join(cmds, " && "))
	return err
}

func (NodeMeta) Read(ctx context.Context, req infer.ReadRequest[NodeMetaArgs, NodeMetaState]) (infer.ReadResponse[NodeMetaArgs, NodeMetaState], error) {
	ctx = reading(ctx)
	st := req.State
	st.Via = currentVia(st.Via, req.Inputs.Via)
	n, err := readNode(ctx, st.NodeMetaArgs)
	if err != nil {
		if !unreachable(ctx, st.Via.Node, err) {
			st.LiveLabels, st.LiveTaints = nil, nil
		}
		return infer.ReadResponse[NodeMetaArgs, NodeMetaState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
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

func (NodeMeta) Diff(ctx context.Context, req infer.DiffRequest[NodeMetaArgs, NodeMetaState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}
	in, st := req.Inputs, req.State
	if in.Node != st.Node {
		d["node"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}
	if !maps.Equal(in.Labels, st.LiveLabels) || !maps.Equal(in.Labels, st.Labels) {
		d["labels"] = p.PropertyDiff{Kind: p.Update}
	}
	if !slices.Equal(taintKeys(in.Taints), taintKeys(st.LiveTaints)) || !slices.Equal(taintKeys(in.Taints), taintKeys(st.Taints)) {
		d["taints"] = p.PropertyDiff{Kind: p.Update}
	}
	if in.Machine != st.Machine {
		d["machine"] = p.PropertyDiff{Kind: p.Update}
	}
	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d}, nil
}

func (NodeMeta) Update(ctx context.Context, req infer.UpdateRequest[NodeMetaArgs, NodeMetaState]) (infer.UpdateResponse[NodeMetaState], error) {
	in, old := req.Inputs, req.State
	st := NodeMetaState{NodeMetaArgs: in, LiveLabels: in.Labels, LiveTaints: in.Taints}
	if req.DryRun {
		return infer.UpdateResponse[NodeMetaState]{Output: st}, nil
	}
	if in.Machine == old.Machine && maps.Equal(in.Labels, old.LiveLabels) && maps.Equal(in.Labels, old.Labels) &&
		slices.Equal(taintKeys(in.Taints), taintKeys(old.LiveTaints)) && slices.Equal(taintKeys(in.Taints), taintKeys(old.Taints)) {
		return infer.UpdateResponse[NodeMetaState]{Output: st}, nil
	}
	return infer.UpdateResponse[NodeMetaState]{Output: st}, applyMeta(ctx, in, old.NodeMetaArgs)
}

// Delete leaves the Node alone: the join's delete removes the Node itself.
func (NodeMeta) Delete(ctx context.Context, req infer.DeleteRequest[NodeMetaState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}

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

// nsFlag is kubectl's namespace flag for a namespaced object, else "".
func (m ManifestArgs) nsFlag() string {
	if m.Namespace == "" {
		return ""
	}
	return " -n " + quote(m.Namespace)
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
	r, err := c.RunInput(ctx, kubectl+" apply -f -", []byte(in.Content))
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

func (Manifest) Read(ctx context.Context, req infer.ReadRequest[ManifestArgs, ManifestState]) (infer.ReadResponse[ManifestArgs, ManifestState], error) {
	ctx = reading(ctx)
	st := req.State
	st.Via = currentVia(st.Via, req.Inputs.Via)
	c, err := dial(ctx, st.Via)
	if err != nil {
		if !unreachable(ctx, st.Via.Node, err) {
			st.Exists = false
		}
		return infer.ReadResponse[ManifestArgs, ManifestState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
	}
	defer c.Close()
	out, code, err := query(ctx, c, kubectl+" get "+quote(st.Kind)+" "+quote(st.Name)+st.nsFlag()+" -o name --ignore-not-found")
	if err != nil {
		return infer.ReadResponse[ManifestArgs, ManifestState]{}, err
	}
	if code != 0 {
		unreachable(ctx, st.Via.Node+"'s API", fmt.Errorf("kubectl exit %d", code))
		return infer.ReadResponse[ManifestArgs, ManifestState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
	}
	st.Exists = strings.TrimSpace(out) != ""
	return infer.ReadResponse[ManifestArgs, ManifestState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

func (Manifest) Diff(ctx context.Context, req infer.DiffRequest[ManifestArgs, ManifestState]) (infer.DiffResponse, error) {
	d := map[string]p.PropertyDiff{}
	in, st := req.Inputs, req.State
	if in.Kind != st.Kind || in.Name != st.Name || in.Namespace != st.Namespace {
		d["name"] = p.PropertyDiff{Kind: p.UpdateReplace}
	}
	if in.Content != st.Content || !st.Exists {
		d["content"] = p.PropertyDiff{Kind: p.Update}
	}
	return infer.DiffResponse{HasChanges: len(d) > 0, DetailedDiff: d, DeleteBeforeReplace: true}, nil
}

func (Manifest) Update(ctx context.Context, req infer.UpdateRequest[ManifestArgs, ManifestState]) (infer.UpdateResponse[ManifestState], error) {
	st := ManifestState{ManifestArgs: req.Inputs, Exists: true}
	if req.DryRun || (req.Inputs.Content == req.State.Content && req.State.Exists) {
		return infer.UpdateResponse[ManifestState]{Output: st}, nil
	}
	return infer.UpdateResponse[ManifestState]{Output: st}, applyManifest(ctx, req.Inputs)
}

func (Manifest) Delete(ctx context.Context, req infer.DeleteRequest[ManifestState]) (infer.DeleteResponse, error) {
	st := req.State
	c, err := dial(ctx, st.Via)
	if err != nil {
		unreachable(ctx, st.Via.Node, err)
		return infer.DeleteResponse{}, nil
	}
	defer c.Close()
	_, err = c.Run(ctx, kubectl+" delete "+quote(st.Kind)+" "+quote(st.Name)+st.nsFlag()+" --ignore-not-found")
	return infer.DeleteResponse{}, err
}
