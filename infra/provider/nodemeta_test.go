package provider

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts/shell"
	"github.com/homelab-dev/homelab/infra/ssh"
)

// fakeNodeObject emulates the API's Node object of one node, as kubectl on
// a control-plane node gets, labels and taints it.
type fakeNodeObject struct {
	name   string
	labels map[string]string
	taints []Taint
	// down: the API does not answer (kubectl's exit 1).
	down bool
}

func serveNodeObject(via *fakeNode, obj *fakeNodeObject) {
	name := shell.Quote(obj.name)
	// The Node's name, as kubectl's argument, in every command about it.
	about := func(cmd string) bool {
		if !strings.Contains(cmd, " node "+name+" ") {
			via.t.Errorf("%s: a command about another Node than %s: %q", via.name, obj.name, cmd)
			return false
		}
		return true
	}
	refused := ssh.Result{Stderr: []byte("The connection to the server 10.0.0.100:6443 was refused\n"), ExitCode: 1}
	via.onScriptFunc("kubectl/nodes-get", func(cmd string) (ssh.Result, error) {
		if obj.down || !about(cmd) {
			return refused, nil
		}
		// As kubectl prints it: lower-case keys, an untainted Node
		// without spec.taints.
		spec := map[string]any{}
		var taints []map[string]string
		for _, t := range obj.taints {
			taint := map[string]string{"key": t.Key, "effect": t.Effect}
			if t.Value != "" {
				taint["value"] = t.Value
			}
			taints = append(taints, taint)
		}
		if len(taints) > 0 {
			spec["taints"] = taints
		}
		b, _ := json.Marshal(map[string]any{"kind": "Node", "metadata": map[string]any{"name": obj.name, "labels": obj.labels}, "spec": spec})
		return ssh.Result{Stdout: b}, nil
	})
	// applyMeta's one script: a kubectl label or taint step a line.
	via.onScriptFunc("kubectl/node-meta", func(cmd string) (ssh.Result, error) {
		if !about(cmd) {
			return refused, nil
		}
		obj.apply(kubectlSteps(cmd))
		return ssh.Result{}, nil
	})
}

// kubectlSteps splits applyMeta's script into its kubectl steps' arguments.
func kubectlSteps(cmd string) [][]string {
	var steps [][]string
	for _, step := range strings.Split(cmd, "\n") {
		if !strings.HasPrefix(step, kubectl+" ") {
			continue
		}
		step = strings.TrimSuffix(step, " || true")
		var words []string
		for _, w := range strings.Fields(step) {
			words = append(words, strings.Trim(w, "'"))
		}
		steps = append(steps, words)
	}
	return steps
}

func (o *fakeNodeObject) apply(steps [][]string) {
	for _, w := range steps {
		// kubectl --kubeconfig F label|taint node NAME [--overwrite] ARGS...
		verb, args := w[3], slices.DeleteFunc(slices.Clone(w[6:]), func(s string) bool { return s == "--overwrite" })
		for _, a := range args {
			switch verb {
			case "label":
				if k, ok := strings.CutSuffix(a, "-"); ok {
					delete(o.labels, k)
				} else {
					k, v, _ := strings.Cut(a, "=")
					o.labels[k] = v
				}
			case "taint":
				spec, remove := strings.CutSuffix(a, "-")
				kv, effect, _ := strings.Cut(spec, ":")
				k, v, _ := strings.Cut(kv, "=")
				o.taints = slices.DeleteFunc(o.taints, func(t Taint) bool { return t.Key == k && t.Effect == effect })
				if !remove {
					o.taints = append(o.taints, Taint{Key: k, Value: v, Effect: effect})
				}
			}
		}
	}
}

func TestNodeMetaLifecycle(t *testing.T) {
	lab := newFakeLab(t)
	ctx := lab.ctx()
	cp1 := lab.node("cp-1")
	obj := &fakeNodeObject{name: "gpu-1", labels: map[string]string{"kubernetes.io/hostname": "gpu-1"}}
	serveNodeObject(cp1, obj)
	in := NodeMetaArgs{Via: lab.conn("cp-1"), Node: "gpu-1",
		Labels: map[string]string{"nvidia.com/gpu.present": "true", "homelab.dev/role": "gpu"},
		Taints: []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}, Machine: "SHA256:a"}

	created, err := (NodeMeta{}).Create(ctx, infer.CreateRequest[NodeMetaArgs]{Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if obj.labels["nvidia.com/gpu.present"] != "true" || obj.labels["homelab.dev/role"] != "gpu" || len(obj.taints) != 1 {
		t.Errorf("after create: labels %v taints %v (did %v)", obj.labels, obj.taints, cp1.mutations())
	}
	st := refresh(t, ctx, NodeMeta{}, in, created.Output)
	// Only the managed keys: the kubelet's own labels are none of ours.
	if want := in.Labels; !maps.Equal(st.LiveLabels, want) {
		t.Errorf("live labels %v", st.LiveLabels)
	}
	if d := diffKeys(t, NodeMeta{}, in, st); len(d) > 0 {
		t.Errorf("as declared, yet %v", d)
	}

	// A label removed by hand comes back.
	delete(obj.labels, "homelab.dev/role")
	st = refresh(t, ctx, NodeMeta{}, in, st)
	if d := diffKeys(t, NodeMeta{}, in, st); !slices.Equal(d, []string{"labels"}) {
		t.Errorf("a label removed by hand shows %v", d)
	}
	if _, err := (NodeMeta{}).Update(ctx, infer.UpdateRequest[NodeMetaArgs, NodeMetaState]{Inputs: in, State: st}); err != nil {
		t.Fatal(err)
	}
	if obj.labels["homelab.dev/role"] != "gpu" {
		t.Errorf("not put back: %v", obj.labels)
	}

	// The inventory drops the taint and a label: both go from the Node,
	// the kubelet's label stays.
	st = refresh(t, ctx, NodeMeta{}, in, st)
	less := in
	less.Labels = map[string]string{"nvidia.com/gpu.present": "true"}
	less.Taints = nil
	updated, err := (NodeMeta{}).Update(ctx, infer.UpdateRequest[NodeMetaArgs, NodeMetaState]{Inputs: less, State: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.labels["homelab.dev/role"]; ok || len(obj.taints) > 0 || obj.labels["kubernetes.io/hostname"] != "gpu-1" {
		t.Errorf("after dropping: labels %v taints %v", obj.labels, obj.taints)
	}

	// Nothing to do: the API is not asked.
	st = refresh(t, ctx, NodeMeta{}, less, updated.Output)
	cp1.reset()
	if _, err := (NodeMeta{}).Update(ctx, infer.UpdateRequest[NodeMetaArgs, NodeMetaState]{Inputs: less, State: st}); err != nil || cp1.dials != 0 {
		t.Errorf("no change: %v after %v", err, cp1.events)
	}
}

// The Node read through a control plane being repaired, or through a
// node refusing the key (nodeMetaRead).
func TestNodeMetaUnreadable(t *testing.T) {
	lab := newFakeLab(t)
	cp1 := lab.node("cp-1")
	obj := &fakeNodeObject{name: "gpu-1", down: true}
	serveNodeObject(cp1, obj)
	in := NodeMetaArgs{Via: lab.conn("cp-1"), Node: "gpu-1", Labels: map[string]string{"a": "1"}}
	last := NodeMetaState{NodeMetaArgs: in, LiveLabels: map[string]string{"a": "1"}}
	st := refresh(t, lab.ctx(), NodeMeta{}, in, last)
	if !maps.Equal(st.LiveLabels, last.LiveLabels) {
		t.Errorf("the API down: live labels %v", st.LiveLabels)
	}
	cp1.dialErr = keyRefusedErr("cp-1")
	st = refresh(t, lab.ctx(), NodeMeta{}, in, last)
	if d := diffKeys(t, NodeMeta{}, in, st); !slices.Equal(d, []string{"labels"}) {
		t.Errorf("refused key: %v", d)
	}
	// The Node is read through the latest inputs' node, not the one the
	// state was made through.
	cp1.dialErr = nil
	obj.down = false
	moved := in
	moved.Via = lab.conn("cp-2")
	serveNodeObject(lab.node("cp-2"), &fakeNodeObject{name: "gpu-1", labels: map[string]string{"a": "1"}})
	cp1.reset()
	st = refresh(t, lab.ctx(), NodeMeta{}, moved, last)
	if cp1.dials != 0 || lab.node("cp-2").dials != 1 || st.Via.Node != "cp-2" {
		t.Errorf("read through cp-1 %d times, cp-2 %d times; via %s", cp1.dials, lab.node("cp-2").dials, st.Via.Node)
	}
}

// threeNodeBatches is a fake lab whose Node reads through cp-1 run three
// at a time, once all three are in, however slow the machine.
func threeNodeBatches(t *testing.T) (*fakeLab, context.Context, *fakeNode) {
	lab := newFakeLab(t)
	batches := newReadBatches()
	batches.nodes.window, batches.nodes.max = 500*time.Millisecond, 3
	lab.config().batches = batches
	return lab, lab.ctx(), lab.node("cp-1")
}

// The Nodes a refresh reads through one control-plane node come from one
// kubectl, which prints several as a List; a Node not registered yet is
// left out of it and read as having nothing.
func TestNodeMetaReadsShareOneKubectl(t *testing.T) {
	lab, ctx, cp1 := threeNodeBatches(t)
	cp1.onScriptFunc("kubectl/nodes-get", func(cmd string) (ssh.Result, error) {
		var items []map[string]any
		for _, n := range []string{"gpu-1", "gpu-2"} {
			if strings.Contains(cmd, shell.Quote(n)) {
				items = append(items, map[string]any{"kind": "Node", "metadata": map[string]any{"name": n, "labels": map[string]string{"role": n}},
					"spec": map[string]any{"taints": []map[string]string{{"key": "gpu", "effect": "NoSchedule"}}}})
			}
		}
		b, _ := json.Marshal(map[string]any{"kind": "List", "items": items})
		return ssh.Result{Stdout: b}, nil
	})
	names := []string{"gpu-1", "gpu-2", "gpu-3"}
	got := make([]NodeMetaState, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			in := NodeMetaArgs{Via: lab.conn("cp-1"), Node: n, Labels: map[string]string{"role": "x"}, Taints: []Taint{{Key: "gpu", Effect: "NoSchedule"}}}
			got[i] = refresh(t, ctx, NodeMeta{}, in, NodeMetaState{NodeMetaArgs: in})
		})
	}
	wg.Wait()
	for i, n := range names {
		st := got[i]
		registered := n != "gpu-3"
		if (st.LiveLabels["role"] == n) != registered || (len(st.LiveTaints) == 1) != registered {
			t.Errorf("%s: labels %v taints %v, registered %v", n, st.LiveLabels, st.LiveTaints, registered)
		}
	}
	if len(cp1.events) != 1 {
		t.Errorf("%d commands, want one kubectl: %v", len(cp1.events), cp1.events)
	}
}

// NodeMetas created together (the workers' joins end together) wait for
// their Nodes in one kubectl per round, and a round that finds none, or
// an API that does not answer for a moment, is waited out rather than
// failing the step.
func TestNodeMetaCreatesWaitTogether(t *testing.T) {
	lab, ctx, cp1 := threeNodeBatches(t)
	names := []string{"gpu-1", "gpu-2", "gpu-3"}
	var mu sync.Mutex
	rounds := 0
	applied := map[string]int{}
	cp1.onScriptFunc("kubectl/nodes-get", func(cmd string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		rounds++
		switch rounds {
		case 1: // no kubelet registered yet
			return ssh.Result{}, nil
		case 2:
			return ssh.Result{Stderr: []byte("The connection to the server 10.0.0.100:6443 was refused\n"), ExitCode: 1}, nil
		}
		var items []map[string]any
		for _, n := range names {
			if strings.Contains(cmd, shell.Quote(n)) {
				items = append(items, map[string]any{"kind": "Node", "metadata": map[string]any{"name": n}})
			}
		}
		b, _ := json.Marshal(map[string]any{"kind": "List", "items": items})
		return ssh.Result{Stdout: b}, nil
	})
	cp1.onScriptFunc("kubectl/node-meta", func(cmd string) (ssh.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range names {
			if strings.Contains(cmd, " node "+shell.Quote(n)+" ") {
				applied[n]++
			}
		}
		return ssh.Result{}, nil
	})
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			in := NodeMetaArgs{Via: lab.conn("cp-1"), Node: n, Labels: map[string]string{"role": "gpu"}}
			_, errs[i] = (NodeMeta{}).Create(ctx, infer.CreateRequest[NodeMetaArgs]{Inputs: in})
		})
	}
	wg.Wait()
	for i, n := range names {
		if errs[i] != nil {
			t.Errorf("%s: %v", n, errs[i])
		}
		if applied[n] != 1 {
			t.Errorf("%s labelled %d times, want once", n, applied[n])
		}
	}
	if rounds != 3 {
		t.Errorf("%d kubectl runs for the three Nodes, want 3 rounds of one (none registered, the API away, all there)", rounds)
	}
}
