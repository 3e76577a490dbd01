package stack

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/homelab-dev/homelab/infra/provider"
)

// Change is one step a preview plans: which resource, what operation.
type Change struct {
	Type string // e.g. homelab:index:File
	Name string // e.g. gpu-1:/etc/kubernetes/kubeadm/join.yaml
	Op   string // create, update, delete, replace, ...
	// Keys are the properties whose change causes the step.
	Keys []string
	// Destroys says what the step destroys ("" when nothing): it needs
	// the user's consent for Node (up --allow-destroy Node).
	Destroys, Node string
	// Renews are the certificates the step renews on its node, each with
	// the date it was valid until.
	Renews []string
	// Repairs says what the step repairs on its node and why ("" for
	// nothing): a kubelet.conf that embeds its client certificate.
	Repairs string
	// Revives are, for a revival of the expired control plane, each node
	// with the certificates renewed on it and the dates they were valid
	// until.
	Revives []string
	// Upgrades is, for the KubernetesUpgrade, the plan in order (or why
	// up would refuse it), from the versions last read.
	Upgrades string
	// paths are the detailed diff's property paths.
	paths []string
}

func (c Change) String() string {
	s := c.Op + " " + c.Type + " " + c.Name
	if len(c.Keys) > 0 {
		s += " (" + strings.Join(c.Keys, ", ") + ")"
	}
	if len(c.Renews) > 0 {
		s += ": renews " + strings.Join(c.Renews, ", ")
	}
	if c.Repairs != "" {
		s += ": repairs: " + c.Repairs
	}
	if len(c.Revives) > 0 {
		s += ": the control plane's certificates expired; REVIVES it over SSH (every node renewed, restarted, then etcd's quorum and /readyz waited for): " + strings.Join(c.Revives, "; ")
	}
	if c.Upgrades != "" {
		s += ": " + c.Upgrades
	}
	if c.Destroys != "" {
		s += ": DESTRUCTIVE, " + c.Destroys + "; refused unless up --allow-destroy " + c.Node
	}
	return s
}

// classify says what a planned step destroys, from the step alone: a
// node leaving the cluster (reset: pods evicted; for a control-plane node
// its etcd member, CA keys and etcd data), an etcd member removed, key
// material deleted. The provider refuses each of them without consent
// whatever this says; this is what preview shows ahead.
func classify(c Change, oldState, newInputs map[string]any) Change {
	switch {
	case c.Type == "homelab:index:KubeadmJoin" && (c.Op == string(apitype.OpDelete) || strings.Contains(c.Op, "replace")):
		c.Node = c.Name
		c.Destroys = "resets " + c.Name + " (its pods are evicted and its kubeadm state deleted)"
		if cp, _ := oldState["controlPlane"].(bool); cp {
			c.Destroys = "resets control-plane node " + c.Name + ": its etcd member is removed, its CA keys, encryption key and etcd data deleted"
		}
	case c.Type == "homelab:index:KubeadmJoin" && c.Op == string(apitype.OpUpdate):
		// The provider says what it repairs in the state it read.
		if slices.Contains(c.paths, "liveKubeletClient") {
			c.Repairs, _ = oldState["kubeletClientRepair"].(string)
		}
		// A join of a node kubeadm left half set up may reset it, and
		// the provider read whether it holds etcd data.
		if risk, _ := oldState["resetRisk"].(string); risk != "" && slices.Contains(c.paths, "joined") {
			c.Node, c.Destroys = c.Name, risk
		}
	case c.Type == "homelab:index:KubeadmInit" && c.Op == string(apitype.OpUpdate):
		// A bootstrap that finds no cluster acts on its node: the
		// provider read whether that resets etcd data or repairs it.
		conn, _ := oldState["connection"].(map[string]any)
		node, _ := conn["node"].(string)
		if risk, _ := oldState["resetRisk"].(string); risk != "" && node != "" {
			c.Node, c.Destroys = node, risk
		}
		c.Repairs, _ = oldState["partialRepair"].(string)
	case c.Type == "homelab:index:EtcdMembers" && c.Op == string(apitype.OpUpdate):
		want := map[string]bool{}
		for _, m := range asList(newInputs["members"]) {
			if name, _ := m["name"].(string); name != "" {
				want[name] = true
			}
		}
		var gone []string
		for _, m := range asList(oldState["live"]) {
			if name, _ := m["name"].(string); name != "" && !want[name] {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			c.Node = strings.Join(gone, ",")
			c.Destroys = "removes etcd member " + strings.Join(gone, ", ")
		}
	case c.Type == "homelab:index:Dataplane" && (c.Op == string(apitype.OpDelete) || strings.Contains(c.Op, "replace")):
		if cni, _ := oldState["cni"].(string); cni != "none" {
			c.Node, c.Destroys = "*", "uninstalls the Cilium pod network: every pod's network is cut"
		}
	case c.Type == "homelab:index:ControlPlaneAddress" && c.Op == string(apitype.OpUpdate):
		// The provider keys each renewal by the certificate's entry in
		// liveExpiry, whose old value is the date that makes it due.
		exp, _ := oldState["liveExpiry"].(map[string]any)
		for _, p := range c.paths {
			name, ok := strings.CutPrefix(p, `liveExpiry["`)
			if !ok {
				continue
			}
			name = strings.TrimSuffix(name, `"]`)
			until, _ := exp[name].(string)
			if t, err := time.Parse(time.RFC3339, until); err == nil {
				until = t.UTC().Format("2006-01-02 15:04 MST")
			}
			c.Renews = append(c.Renews, name+" (valid until "+until+")")
		}
		sort.Strings(c.Renews)
	case c.Type == "homelab:index:ControlPlaneRevival" && c.Op == string(apitype.OpUpdate):
		c.Revives = revives(c.paths, oldState)
	case c.Type == "homelab:index:File" && c.Op == string(apitype.OpDelete):
		node, path, _ := strings.Cut(c.Name, ":")
		if strings.HasPrefix(path, "/etc/kubernetes/pki/") && strings.HasSuffix(path, ".key") || strings.HasPrefix(path, "/etc/kubernetes/encryption/") {
			c.Node, c.Destroys = node, "deletes "+path+" from "+node
		}
	}
	return c
}

// revives reads a revival's detailed diff, keyed by node and certificate
// into the state's liveExpiry (whose old values are their dates): each
// node, in name order, with what it renews and until when it was valid.
func revives(paths []string, oldState map[string]any) []string {
	exp, _ := oldState["liveExpiry"].(map[string]any)
	names := map[string][]string{}
	until := map[string][]string{}
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, `liveExpiry["`)
		if !ok {
			continue
		}
		node, name, ok := strings.Cut(strings.TrimSuffix(rest, `"]`), `"]["`)
		if !ok {
			continue
		}
		names[node] = append(names[node], name)
		dates, _ := exp[node].(map[string]any)
		if v, _ := dates[name].(string); v != "" {
			until[node] = append(until[node], v)
		}
	}
	var out []string
	for _, node := range slices.Sorted(maps.Keys(names)) {
		slices.Sort(names[node])
		line := node + " renews " + strings.Join(names[node], ", ")
		if d := until[node]; len(d) > 0 {
			slices.Sort(d) // RFC 3339 in UTC sorts by time
			first, last := stampOf(d[0]), stampOf(d[len(d)-1])
			if first == last {
				line += " (valid until " + first + ")"
			} else {
				line += " (valid until " + first + " to " + last + ")"
			}
		}
		out = append(out, line)
	}
	return out
}

func stampOf(rfc3339 string) string {
	if t, err := time.Parse(time.RFC3339, rfc3339); err == nil {
		return t.UTC().Format("2006-01-02 15:04 MST")
	}
	return rfc3339
}

func asList(v any) []map[string]any {
	items, _ := v.([]any)
	var out []map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// PreviewChanges previews and returns every step other than "same", sorted.
func (s *Stack) PreviewChanges(ctx context.Context, refresh bool) ([]Change, error) {
	return s.PreviewChangesFor(ctx, refresh, Run{})
}

// PreviewChangesFor is PreviewChanges for what up would do given run
// (--renew-certificates).
func (s *Stack) PreviewChangesFor(ctx context.Context, refresh bool, run Run) ([]Change, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	ch := make(chan events.EngineEvent)
	done := make(chan []Change)
	go func() {
		var out []Change
		says := map[string]string{} // by URN: the upgrade's Diff says its plan
		var urns []string
		for ev := range ch {
			if d := ev.DiagnosticEvent; d != nil && d.URN != "" {
				if msg := strings.TrimSpace(d.Message); strings.HasPrefix(msg, provider.UpgradeSays) || strings.HasPrefix(msg, provider.RefusalSays) {
					says[string(d.URN)] = strings.ReplaceAll(msg, "\n", "; ")
				}
			}
			pre := ev.ResourcePreEvent
			if pre == nil || pre.Metadata.Op == apitype.OpSame || pre.Metadata.Op == apitype.OpRead || pre.Metadata.Op == apitype.OpRefresh {
				continue
			}
			m := pre.Metadata
			var old, inputs map[string]any
			if m.Old != nil {
				old = m.Old.Outputs
			}
			if m.New != nil {
				inputs = m.New.Inputs
			}
			var paths []string
			for p := range m.DetailedDiff {
				paths = append(paths, p)
			}
			c := classify(Change{Type: m.Type, Name: urnName(m.URN), Op: string(m.Op), Keys: m.Diffs, paths: paths}, old, inputs)
			out = append(out, c)
			urns = append(urns, string(m.URN))
		}
		// Diff logs before its step starts; matched once all is in.
		for i := range out {
			out[i].Upgrades = says[urns[i]]
		}
		sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
		done <- out
	}()
	opts := []optpreview.Option{optpreview.EventStreams(ch), optpreview.ProgressStreams(s.progress), optpreview.Diff()}
	if refresh {
		opts = append(opts, optpreview.Refresh())
	}
	err := s.withRun(run, func() error {
		_, err := s.s.Preview(ctx, opts...)
		return err
	})
	changes := <-done
	return changes, err
}

func urnName(urn string) string {
	if i := strings.LastIndex(urn, "::"); i >= 0 {
		return urn[i+2:]
	}
	return urn
}
