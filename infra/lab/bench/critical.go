package bench

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// stepClock records, from the engine's event stream, when each resource's
// step started (ResourcePreEvent) and ended (ResOutputsEvent). The events'
// own timestamps are whole seconds, so the time each event is received is
// used instead: both ends of a step arrive through the same tailed event
// log, so its delay cancels out of a step's duration.
type stepClock struct {
	mu     sync.Mutex
	start  map[string]time.Time
	end    map[string]time.Time
	op     map[string]apitype.OpType
	failed []string
	reads  bool // time the refresh's reads instead of the steps
}

func newStepClock() *stepClock {
	return &stepClock{start: map[string]time.Time{}, end: map[string]time.Time{}, op: map[string]apitype.OpType{}}
}

// newReadClock times a refresh's reads, the steps' counterpart.
func newReadClock() *stepClock {
	c := newStepClock()
	c.reads = true
	return c
}

// skipOp: refresh reads are not the up's own steps (and a fresh stack has
// nothing to refresh); a read clock keeps only them.
func (c *stepClock) skipOp(op apitype.OpType) bool {
	return (op == apitype.OpRefresh || op == apitype.OpRead) != c.reads
}

// listen is a channel for an engine run's events, each timed as it
// arrives, and a wait for the last of them once the run returned (the
// engine closes the channel; ten seconds at most).
func (c *stepClock) listen() (chan<- events.EngineEvent, func()) {
	ch := make(chan events.EngineEvent, 256)
	done := make(chan struct{})
	go func() {
		for ev := range ch {
			c.add(ev, time.Now())
		}
		close(done)
	}()
	return ch, func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	}
}

func (c *stepClock) add(ev events.EngineEvent, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ev.ResourcePreEvent != nil && !ev.ResourcePreEvent.Planning:
		md := ev.ResourcePreEvent.Metadata
		if c.skipOp(md.Op) {
			return
		}
		if _, seen := c.start[md.URN]; !seen {
			c.start[md.URN] = at
			c.op[md.URN] = md.Op
		}
	case ev.ResOutputsEvent != nil && !ev.ResOutputsEvent.Planning:
		// A refresh's outputs carry what the read found (same, update),
		// not "refresh": the step it ends is the one its start opened.
		md := ev.ResOutputsEvent.Metadata
		// The first outputs after a start end it: a read clock must not
		// take the up's own step, which follows the read, for the read.
		_, started := c.start[md.URN]
		if _, ended := c.end[md.URN]; !started || ended {
			return
		}
		c.end[md.URN] = at
	case ev.ResOpFailedEvent != nil:
		c.failed = append(c.failed, ev.ResOpFailedEvent.Metadata.URN)
	}
}

// own returns each resource's own step duration.
func (c *stepClock) own() map[string]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]time.Duration{}
	for urn, s := range c.start {
		if e, ok := c.end[urn]; ok && e.After(s) {
			out[urn] = e.Sub(s)
		}
	}
	return out
}

// span is when the first of the given resources' steps started and the
// last ended.
func (c *stepClock) span(urns []string) (first, last time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range urns {
		if s, ok := c.start[u]; ok && (first.IsZero() || s.Before(first)) {
			first = s
		}
		if e, ok := c.end[u]; ok && e.After(last) {
			last = e
		}
	}
	return first, last
}

// slowest is the n longest own durations, longest first.
func (c *stepClock) slowest(n int) []step {
	var out []step
	for urn, d := range c.own() {
		out = append(out, step{URN: urn, Own: d})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Own != out[j].Own {
			return out[i].Own > out[j].Own
		}
		return out[i].URN < out[j].URN
	})
	return out[:min(n, len(out))]
}

// resource is what the benchmark needs of a resource in the stack's
// exported deployment.
type resource struct {
	URN          string   `json:"urn"`
	Custom       bool     `json:"custom"`
	Type         string   `json:"type"`
	Parent       string   `json:"parent"`
	Dependencies []string `json:"dependencies"`
	Provider     string   `json:"provider"`
}

// parseDeployment reads the resources out of a deployment (the
// "deployment" object of `pulumi stack export`).
func parseDeployment(raw json.RawMessage) ([]resource, error) {
	var d struct {
		Resources []resource `json:"resources"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("reading the exported deployment: %w", err)
	}
	return d.Resources, nil
}

// providerURN strips the ID from a provider reference (URN::ID).
func providerURN(ref string) string {
	if i := strings.LastIndex(ref, "::"); i > 0 {
		return ref[:i]
	}
	return ref
}

// step is one resource on a path, with its own duration.
type step struct {
	URN string
	Own time.Duration
}

// criticalPath is the longest chain of resources, each waiting for the
// one before it, weighed by own step durations. A resource waits for its
// dependencies, its provider and (when it is a custom resource) its
// parent. Component resources and the stack do no work of their own: their
// steps span their children's, so they weigh nothing.
func criticalPath(res []resource, own map[string]time.Duration) (time.Duration, []step) {
	byURN := map[string]resource{}
	for _, r := range res {
		byURN[r.URN] = r
	}
	weight := func(r resource) time.Duration {
		if !r.Custom {
			return 0
		}
		return own[r.URN]
	}
	type best struct {
		total time.Duration
		prev  string
	}
	memo := map[string]best{}
	visiting := map[string]bool{}
	var longest func(urn string) time.Duration
	longest = func(urn string) time.Duration {
		if b, ok := memo[urn]; ok {
			return b.total
		}
		r, ok := byURN[urn]
		if !ok || visiting[urn] {
			return 0 // not in the deployment, or a cycle (none in a valid one)
		}
		visiting[urn] = true
		defer delete(visiting, urn)
		preds := append([]string{}, r.Dependencies...)
		if r.Provider != "" {
			preds = append(preds, providerURN(r.Provider))
		}
		if p, ok := byURN[r.Parent]; ok && p.Custom {
			preds = append(preds, r.Parent)
		}
		sort.Strings(preds) // ties resolve the same way every run
		var b best
		for _, p := range preds {
			if t := longest(p); b.prev == "" || t > b.total {
				b = best{total: t, prev: p}
			}
		}
		b.total += weight(r)
		memo[urn] = b
		return b.total
	}
	var end string
	var total time.Duration
	urns := make([]string, 0, len(byURN))
	for u := range byURN {
		urns = append(urns, u)
	}
	sort.Strings(urns)
	for _, u := range urns {
		if t := longest(u); t > total {
			total, end = t, u
		}
	}
	var chain []step
	for u := end; u != ""; u = memo[u].prev {
		if r := byURN[u]; r.Custom {
			chain = append(chain, step{URN: u, Own: weight(r)})
		}
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return total, chain
}

// shortName turns a URN into "Type name" (File cp-1:/etc/...).
func shortName(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return urn
	}
	typ := parts[2]
	if i := strings.LastIndex(typ, "$"); i >= 0 {
		typ = typ[i+1:]
	}
	if pkg, ok := strings.CutPrefix(typ, "pulumi:providers:"); ok {
		return "provider " + pkg + " " + strings.Join(parts[3:], "::")
	}
	if i := strings.LastIndex(typ, ":"); i >= 0 {
		typ = typ[i+1:]
	}
	return typ + " " + strings.Join(parts[3:], "::")
}
