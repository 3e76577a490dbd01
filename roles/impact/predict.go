package impact

import (
	"fmt"
	"sort"
	"strings"
)

// Failure kinds.
const (
	FailOff        = "off"        // nodes powered off
	FailKeepalived = "keepalived" // the VIP holder's keepalived dead, the node alive
	FailCut        = "cut"        // a node alive but cut off the network
)

// Failure is one thing that goes wrong.
type Failure struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
}

// States of a consumer during a failure.
const (
	OK     = "ok"     // its address answers with an apiserver (or etcd member) that has quorum
	Down   = "down"   // it lives, and its address answers nothing usable
	Gone   = "gone"   // it ran on a node that is off: nothing to serve
	Manual = "manual" // answers once someone repoints the DNS name
	NA     = "n/a"    // the failure does not exist in this layout
)

// Cell is one consumer's state during one failure.
type Cell struct {
	Consumer string `json:"consumer"`
	State    string `json:"state"`
	Why      string `json:"why,omitempty"`
}

// Outcome is one failure's prediction.
type Outcome struct {
	Failure Failure `json:"failure"`
	// Members counts etcd members alive and on the network.
	Members  int    `json:"etcdMembersUp"`
	Quorum   bool   `json:"etcdQuorum"`
	Writable bool   `json:"writable"`
	VIP      string `json:"vipHolder,omitempty"`
	Cells    []Cell `json:"cells"`
}

// Prediction is one layout's consumers and outcomes.
type Prediction struct {
	Layout    string     `json:"layout"`
	Endpoint  string     `json:"endpoint"`
	Consumers []Consumer `json:"consumers"`
	Outcomes  []Outcome  `json:"outcomes"`
}

// Failures lists what compare examines: each node off, each pair of
// control-plane nodes off, the VIP holder's keepalived dead, each
// control-plane node cut off.
func (c *Cluster) Failures() []Failure {
	var out []Failure
	for _, n := range append(append([]string{}, c.ControlPlanes...), c.Workers...) {
		out = append(out, Failure{ID: "off " + n, Kind: FailOff, Nodes: []string{n}})
	}
	for i := range c.ControlPlanes {
		for j := i + 1; j < len(c.ControlPlanes); j++ {
			a, b := c.ControlPlanes[i], c.ControlPlanes[j]
			out = append(out, Failure{ID: "off " + a + "+" + b, Kind: FailOff, Nodes: []string{a, b}})
		}
	}
	out = append(out, Failure{ID: "keepalived dead on VIP holder", Kind: FailKeepalived, Nodes: []string{c.InitialHolder()}})
	for _, n := range c.ControlPlanes {
		out = append(out, Failure{ID: "cut " + n, Kind: FailCut, Nodes: []string{n}})
	}
	return out
}

// InitialHolder is the control-plane node with the highest keepalived
// priority: where the VIP sits while everything is healthy.
func (c *Cluster) InitialHolder() string {
	best, bestP := "", -1
	for _, n := range c.ControlPlanes {
		if p, ok := c.Priority[n]; ok && p > bestP {
			best, bestP = n, p
		}
	}
	return best
}

// world is the machines' state during a failure.
type world struct {
	c         *Cluster
	off, cut  map[string]bool
	noKeepalv map[string]bool
}

func (w *world) alive(n string) bool { return !w.off[n] }

// reach: can a process on node from (""= the LAN) open a connection to node to?
func (w *world) reach(from, to string) bool {
	if !w.alive(to) {
		return false
	}
	if from == to {
		return true
	}
	return !w.cut[to] && (from == "" || !w.cut[from])
}

// quorumSide returns the etcd members that can still form a majority.
func (w *world) quorumSide() []string {
	var connected []string
	for _, m := range w.c.ControlPlanes {
		if w.alive(m) && !w.cut[m] {
			connected = append(connected, m)
		}
	}
	if 2*len(connected) > len(w.c.ControlPlanes) {
		return connected
	}
	// A cut-off member alone is a majority only in a cluster of one.
	for _, m := range w.c.ControlPlanes {
		if w.alive(m) && w.cut[m] && 2 > len(w.c.ControlPlanes) {
			return []string{m}
		}
	}
	return nil
}

// serves: the apiserver on n answers with data (its etcd member is on
// the quorum side).
func (w *world) serves(n string) bool {
	if !w.alive(n) {
		return false
	}
	for _, m := range w.quorumSide() {
		if m == n {
			return true
		}
	}
	return false
}

// vipHolder is who holds the VIP as seen from node from: keepalived's
// health check only lowers the priority of a node whose apiserver is down,
// and every live node's apiserver runs, so the highest-priority live node
// with keepalived among those that can hear each other wins.
func (w *world) vipHolder(from string) string {
	best, bestP := "", -1
	for _, n := range w.c.ControlPlanes {
		if !w.alive(n) || w.noKeepalv[n] {
			continue
		}
		if from != n && !w.reach(from, n) {
			continue
		}
		if w.cut[from] && from != n {
			continue
		}
		if p := w.c.Priority[n]; p > bestP {
			best, bestP = n, p
		}
	}
	return best
}

// Predict evaluates every failure.
func (c *Cluster) Predict() *Prediction {
	p := &Prediction{Layout: c.Layout, Endpoint: c.Endpoint, Consumers: c.Consumers}
	for _, f := range c.Failures() {
		p.Outcomes = append(p.Outcomes, c.Evaluate(f))
	}
	return p
}

// Evaluate predicts one failure.
func (c *Cluster) Evaluate(f Failure) Outcome {
	w := &world{c: c, off: map[string]bool{}, cut: map[string]bool{}, noKeepalv: map[string]bool{}}
	o := Outcome{Failure: f}
	if f.Kind == FailKeepalived && c.Layout != "vip" {
		for _, cons := range c.Consumers {
			o.Cells = append(o.Cells, Cell{Consumer: cons.ID, State: NA, Why: "no keepalived in the " + c.Layout + " layout"})
		}
		o.Members, o.Quorum, o.Writable = len(c.ControlPlanes), true, true
		return o
	}
	for _, n := range f.Nodes {
		switch f.Kind {
		case FailOff:
			w.off[n] = true
		case FailCut:
			w.cut[n] = true
		case FailKeepalived:
			w.noKeepalv[n] = true
		}
	}
	side := w.quorumSide()
	o.Quorum = len(side) > 0
	for _, m := range c.ControlPlanes {
		if w.alive(m) && !w.cut[m] {
			o.Members++
		}
	}
	for _, m := range side {
		if w.serves(m) {
			o.Writable = true
		}
	}
	if c.Layout == "vip" {
		o.VIP = w.vipHolder("")
	}
	for _, cons := range c.Consumers {
		st, why := w.state(cons)
		o.Cells = append(o.Cells, Cell{Consumer: cons.ID, State: st, Why: why})
	}
	return o
}

func (w *world) state(cons Consumer) (string, string) {
	if cons.Node != "" && !w.alive(cons.Node) {
		return Gone, cons.Node + " is off"
	}
	if cons.Kind == KindEtcd {
		if w.serves(cons.Node) {
			return OK, ""
		}
		return Down, "its member is cut off from the quorum"
	}
	var server string
	switch cons.Target {
	case TargetLocal:
		server = cons.Node
		if server == "" {
			return Down, "loopback on a machine with no apiserver"
		}
	case TargetNode:
		if cons.TargetNode == "" {
			return Down, cons.Risk
		}
		if !w.reach(cons.Node, cons.TargetNode) {
			if !w.alive(cons.TargetNode) {
				return Down, cons.TargetNode + " is off and " + cons.Address + " is its own address"
			}
			return Down, "cannot reach " + cons.TargetNode
		}
		server = cons.TargetNode
	case TargetEndpointVIP:
		server = w.vipHolder(cons.Node)
		if server == "" {
			return Down, "no node holds the VIP"
		}
	case TargetDNS:
		for _, n := range w.c.ControlPlanes {
			if !w.serves(n) || !w.reach(cons.Node, n) {
				return Manual, "answers once " + w.c.DNSName + " no longer lists " + n
			}
		}
		return OK, ""
	}
	if !w.serves(server) {
		if w.quorumSide() == nil {
			return Down, "etcd has no quorum"
		}
		return Down, "the apiserver on " + server + " is cut off from etcd's quorum"
	}
	if server != cons.TargetNode && cons.Target == TargetEndpointVIP && server != w.c.InitialHolder() {
		return OK, "through the VIP, now on " + server
	}
	return OK, ""
}

// Cell returns the named consumer's cell.
func (o Outcome) Cell(consumer string) (Cell, bool) {
	for _, c := range o.Cells {
		if c.Consumer == consumer {
			return c, true
		}
	}
	return Cell{}, false
}

// Summary counts consumers per state, e.g. "ok 12, down 5, gone 2".
func (o Outcome) Summary() string {
	n := map[string]int{}
	for _, c := range o.Cells {
		n[c.State]++
	}
	var parts []string
	for _, s := range []string{OK, Down, Manual, Gone, NA} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n[s]))
		}
	}
	return strings.Join(parts, ", ")
}

// Risks lists the consumers that pin one node's own address, sorted.
func (p *Prediction) Risks() []Consumer {
	var out []Consumer
	for _, c := range p.Consumers {
		if c.Risk != "" {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
