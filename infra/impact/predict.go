package impact

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Failure kinds.
const (
	// FailOff: nodes powered off; every process and address gone.
	FailOff = "off"
	// FailCut: nodes alive but their link down (cable pulled, switch port
	// dead): every process keeps running, a split rather than a death.
	// keepalived sees the carrier go, enters FAULT and drops the VIP.
	FailCut = "cut"
	// FailKeepalived: a node's keepalived killed (SIGKILL: no goodbye
	// advert, no clean-up of its own), the node and its apiserver alive.
	// The backups take over when their master-down timer runs out. The
	// dead keepalived's VIP leaves with it where keepalived.service's
	// ExecStopPost= removes it (homelab's drop-in); elsewhere it stays on
	// the interface until keepalived starts again: two holders.
	FailKeepalived = "keepalived"
	// FailAPIServer: a node's kube-apiserver stopped while the node and its
	// keepalived live: the track script lowers its priority and the VIP
	// moves to the next node within fall x interval plus the master-down
	// timer.
	FailAPIServer = "apiserver"
)

// Kinds lists every failure kind.
var Kinds = []string{FailOff, FailCut, FailKeepalived, FailAPIServer}

// Failure is one thing that goes wrong.
type Failure struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
}

// NewFailure names a failure of that kind on those nodes the way compare
// lists it ("off cp-1+cp-2", "apiserver dead on cp-1").
func NewFailure(kind string, nodes ...string) Failure {
	on := strings.Join(nodes, "+")
	id := kind + " " + on
	switch kind {
	case FailKeepalived, FailAPIServer:
		id = kind + " dead on " + on
	}
	return Failure{ID: id, Kind: kind, Nodes: nodes}
}

// States of a consumer during a failure.
const (
	OK     = "ok"     // its address answers with an apiserver (or etcd member) that has quorum
	Down   = "down"   // it lives, and its address answers nothing usable
	Gone   = "gone"   // its process does not run: its node is off, or it is the stopped apiserver
	Manual = "manual" // answers once someone repoints the DNS name
	NA     = "n/a"    // the failure does not exist in this layout
)

// What can be done with the cluster's data.
const (
	DataWritable = "writable"
	// DataReadOnly: etcd has no quorum, but a member on the network still
	// answers serializable (possibly stale) reads: `etcdctl get
	// --consistency=s` and `etcdctl snapshot save` work, writes do not, and
	// neither do the apiserver's reads, which need quorum.
	DataReadOnly = "read-only"
	// DataUnavailable: no member answers at all.
	DataUnavailable = "unavailable"
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
	Members int `json:"etcdMembersUp"`
	// Healthy counts members that have a leader and a quorum behind it
	// (etcd's /health): the quorum side, or none.
	Healthy  int  `json:"etcdMembersHealthy"`
	Quorum   bool `json:"etcdQuorum"`
	Writable bool `json:"writable"`
	// Data is DataWritable, DataReadOnly or DataUnavailable.
	Data string `json:"data"`
	// VIP is the holder the LAN reaches through the VIP (vip only).
	VIP string `json:"vipHolder,omitempty"`
	// VIPHolders lists every node with the VIP on its interface: more than
	// one is a split brain.
	VIPHolders []string `json:"vipHolders,omitempty"`
	// VIPAfter is the holder once the failed nodes are back: the preferred
	// node again (preemption), or VIP where nopreempt keeps it.
	VIPAfter string `json:"vipAfterRecovery,omitempty"`
	Cells    []Cell `json:"cells"`
}

// SplitBrain reports whether more than one node holds the VIP.
func (o Outcome) SplitBrain() bool { return len(o.VIPHolders) > 1 }

// Handback reports whether the VIP moves again after recovery.
func (o Outcome) Handback() bool { return o.VIP != "" && o.VIPAfter != "" && o.VIP != o.VIPAfter }

// Prediction is one layout's consumers and outcomes.
type Prediction struct {
	Layout    string     `json:"layout"`
	Endpoint  string     `json:"endpoint"`
	Consumers []Consumer `json:"consumers"`
	// VIPHolder is where the VIP sits while everything is healthy.
	VIPHolder string    `json:"vipHolder,omitempty"`
	Outcomes  []Outcome `json:"outcomes"`
}

// Failures lists what compare examines: each node off, each pair of
// control-plane nodes off, and on each control-plane node: cut off the
// network, keepalived dead, the apiserver dead.
func (c *Cluster) Failures() []Failure {
	var out []Failure
	for _, n := range append(append([]string{}, c.ControlPlanes...), c.Workers...) {
		out = append(out, NewFailure(FailOff, n))
	}
	for i := range c.ControlPlanes {
		for j := i + 1; j < len(c.ControlPlanes); j++ {
			out = append(out, NewFailure(FailOff, c.ControlPlanes[i], c.ControlPlanes[j]))
		}
	}
	for _, kind := range []string{FailCut, FailKeepalived, FailAPIServer} {
		for _, n := range c.ControlPlanes {
			out = append(out, NewFailure(kind, n))
		}
	}
	return out
}

// Check says what is wrong with a failure this cluster cannot have: an
// unknown kind or node, a node named twice, keepalived or an apiserver on
// a worker.
func (c *Cluster) Check(f Failure) error {
	if !slices.Contains(Kinds, f.Kind) {
		return fmt.Errorf("failure kind %q: use one of %s", f.Kind, strings.Join(Kinds, ", "))
	}
	if len(f.Nodes) == 0 {
		return fmt.Errorf("no node to fail")
	}
	var problems []string
	seen := map[string]bool{}
	for _, n := range f.Nodes {
		cp := slices.Contains(c.ControlPlanes, n)
		switch {
		case seen[n]:
			problems = append(problems, n+" is named twice")
		case !cp && !slices.Contains(c.Workers, n):
			problems = append(problems, fmt.Sprintf("%q is not a node of the inventory", n))
		case !cp && (f.Kind == FailKeepalived || f.Kind == FailAPIServer):
			problems = append(problems, n+" is a worker: it runs no "+map[string]string{FailKeepalived: "keepalived", FailAPIServer: "kube-apiserver"}[f.Kind])
		}
		seen[n] = true
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// InitialHolder is the control-plane node with the highest keepalived
// priority: where the VIP sits while everything is healthy.
func (c *Cluster) InitialHolder() string {
	return (&world{c: c}).lanMaster()
}

// world is the machines' state during a failure.
type world struct {
	c                             *Cluster
	off, cut, noKeepalived, noAPI map[string]bool
}

func (w *world) alive(n string) bool { return !w.off[n] }

// connected: alive and on the network.
func (w *world) connected(n string) bool { return w.alive(n) && !w.cut[n] }

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
		if w.connected(m) {
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

func (w *world) onQuorum(n string) bool { return slices.Contains(w.quorumSide(), n) }

// serves: the apiserver on n runs and answers with data (its etcd member
// is on the quorum side).
func (w *world) serves(n string) bool {
	return w.alive(n) && !w.noAPI[n] && w.onQuorum(n)
}

// whyNot says why the apiserver on n does not serve.
func (w *world) whyNot(n string) string {
	switch {
	case !w.alive(n):
		return n + " is off"
	case w.noAPI[n]:
		return "the apiserver on " + n + " is stopped"
	case w.quorumSide() == nil:
		return "etcd has no quorum"
	}
	return "the apiserver on " + n + " is cut off from etcd's quorum"
}

// priority is n's effective keepalived priority: the check script (/livez
// on the node's own apiserver, which fails when the apiserver is stopped
// or its etcd member has no quorum) adds its (negative) weight;
// keepalived keeps the result within 1..254.
func (w *world) priority(n string) int {
	p := w.c.Priority[n]
	if w.noAPI[n] || !w.onQuorum(n) {
		p += w.c.CheckWeight
	}
	return min(max(p, 1), 254)
}

// lanMaster is the keepalived master the connected nodes elect: the
// highest effective priority among live, connected nodes whose keepalived
// runs (a cut-off node's keepalived is in FAULT: it lost its carrier);
// equal priorities go to the higher primary address, as VRRP says.
func (w *world) lanMaster() string {
	best, bestP := "", 0
	for _, n := range w.c.ControlPlanes {
		if !w.connected(n) || w.noKeepalived[n] {
			continue
		}
		p := w.priority(n)
		if p > bestP || (p == bestP && w.higherAddress(n, best)) {
			best, bestP = n, p
		}
	}
	return best
}

func (w *world) higherAddress(a, b string) bool {
	x, err1 := netip.ParseAddr(w.c.Addresses[a])
	y, err2 := netip.ParseAddr(w.c.Addresses[b])
	return err1 == nil && err2 == nil && x.Compare(y) > 0
}

// vipHolder is who answers the VIP for a process on node from ("": the
// LAN): the LAN's master, unless from is cut off and reaches nobody.
func (w *world) vipHolder(from string) string {
	if from != "" && !w.connected(from) {
		return ""
	}
	return w.lanMaster()
}

// holders lists every node with the VIP on an interface: the LAN's master,
// and a node whose keepalived was killed while it held the VIP if nothing
// removes the address then (no ExecStopPost= clean-up; a restarted
// keepalived does, at start).
func (w *world) holders(before string) []string {
	var out []string
	master := w.lanMaster()
	for _, n := range w.c.ControlPlanes {
		stale := n == before && w.noKeepalived[n] && w.alive(n) && !w.c.VIPCleanup[n]
		if n == master || stale {
			out = append(out, n)
		}
	}
	return out
}

// Predict evaluates every failure.
func (c *Cluster) Predict() *Prediction {
	p := &Prediction{Layout: c.Layout, Endpoint: c.Endpoint, Consumers: c.Consumers}
	if c.Layout == "vip" {
		p.VIPHolder = c.InitialHolder()
	}
	for _, f := range c.Failures() {
		p.Outcomes = append(p.Outcomes, c.Evaluate(f))
	}
	return p
}

// Evaluate predicts one failure (Check it first).
func (c *Cluster) Evaluate(f Failure) Outcome {
	w := &world{c: c, off: map[string]bool{}, cut: map[string]bool{}, noKeepalived: map[string]bool{}, noAPI: map[string]bool{}}
	o := Outcome{Failure: f}
	if f.Kind == FailKeepalived && c.Layout != "vip" {
		for _, cons := range c.Consumers {
			o.Cells = append(o.Cells, Cell{Consumer: cons.ID, State: NA, Why: "no keepalived in the " + c.Layout + " layout"})
		}
		n := len(c.ControlPlanes)
		o.Members, o.Healthy, o.Quorum, o.Writable, o.Data = n, n, true, true, DataWritable
		return o
	}
	before := c.InitialHolder()
	for _, n := range f.Nodes {
		switch f.Kind {
		case FailOff:
			w.off[n] = true
		case FailCut:
			w.cut[n] = true
		case FailKeepalived:
			w.noKeepalived[n] = true
		case FailAPIServer:
			w.noAPI[n] = true
		}
	}
	side := w.quorumSide()
	o.Quorum = len(side) > 0
	o.Healthy = len(side)
	for _, m := range c.ControlPlanes {
		if w.connected(m) {
			o.Members++
		}
	}
	for _, m := range side {
		if w.serves(m) {
			o.Writable = true
		}
	}
	switch {
	case o.Writable:
		o.Data = DataWritable
	case o.Members > 0:
		o.Data = DataReadOnly
	default:
		o.Data = DataUnavailable
	}
	if c.Layout == "vip" {
		o.VIP = w.vipHolder("")
		o.VIPHolders = w.holders(before)
		o.VIPAfter = before
		if c.NoPreempt && o.VIP != "" {
			o.VIPAfter = o.VIP
		}
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
		if w.noAPI[cons.Node] {
			return Gone, "its apiserver is stopped"
		}
		if w.onQuorum(cons.Node) {
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
			if cons.Node != "" && !w.connected(cons.Node) {
				return Down, cons.Node + " is cut off: no VIP holder in reach"
			}
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
		return Down, w.whyNot(server)
	}
	if cons.Target == TargetEndpointVIP && server != w.c.InitialHolder() {
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

// Outcome returns the prediction for the failure with that ID.
func (p *Prediction) Outcome(id string) (Outcome, bool) {
	for _, o := range p.Outcomes {
		if o.Failure.ID == id {
			return o, true
		}
	}
	return Outcome{}, false
}
