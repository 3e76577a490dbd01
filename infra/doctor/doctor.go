// Package doctor checks a running homelab against its inventory, live, and
// names what is wrong: a node that came back on another address, etcd or
// the apiserver configured for an address the node no longer has, a served
// certificate lacking an address the API is reached by, a server still
// serving the certificate its renewed file replaced, stale etcd peer
// URLs, every place an address is hard-coded that would break if its
// node died or moved, and selectors that select nothing (a Service, a
// PodDisruptionBudget, a NetworkPolicy or a Deployment matching no pod,
// with the labels it most likely meant). It changes nothing.
package doctor

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/pki"
)

// DialFunc opens connections (the emulated homelab's come from its gateway
// namespace).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Target is the cluster to examine.
type Target struct {
	Inventory  *inventory.Inventory
	Bundle     *pki.Bundle
	PrivateKey []byte
	KnownHosts string
	Dial       DialFunc
	// CommandLog, when set, receives every command run on a node
	// (ssh.WithCommandLog).
	CommandLog string
	// MACs are each node's NIC MACs as up last read them (the stack's
	// macs output): what finds a moved node whose inventory entry
	// declares no mac.
	MACs map[string][]string
}

// macsOf are the MACs a node is known by: the declared one, else those
// up recorded.
func (t Target) macsOf(n inventory.Node) []string {
	if n.MAC != "" {
		return []string{strings.ToLower(n.MAC)}
	}
	var out []string
	for _, m := range t.MACs[n.Name] {
		out = append(out, strings.ToLower(m))
	}
	return out
}

// Status of one finding. Only Fail makes the report fail: Warn marks a
// single point of failure worth knowing, Note an address that is inherent
// to the node (its own components reaching it).
type Status string

const (
	OK   Status = "ok"
	Note Status = "note"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Finding is one row of the report.
type Finding struct {
	Check  string
	Where  string
	Status Status
	Detail string
}

// Report is every finding plus the causes named from them.
type Report struct {
	Findings []Finding
	// Causes are the root causes, in words an operator can act on.
	Causes []string
	// VIPHolder is the node holding the VIP ("" when none or not the vip
	// layout).
	VIPHolder string

	mu sync.Mutex
}

func (r *Report) add(check, where string, st Status, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Findings = append(r.Findings, Finding{Check: check, Where: where, Status: st, Detail: fmt.Sprintf(format, args...)})
}

func (r *Report) cause(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := fmt.Sprintf(format, args...)
	for _, o := range r.Causes {
		if o == c {
			return
		}
	}
	r.Causes = append(r.Causes, c)
}

// OK reports whether nothing failed.
func (r *Report) OK() bool {
	for _, f := range r.Findings {
		if f.Status == Fail {
			return false
		}
	}
	return true
}

// Failed returns the failed findings.
func (r *Report) Failed() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Status == Fail {
			out = append(out, f)
		}
	}
	return out
}

// checks are listed in this order, whatever order they finished in.
var order = []string{"node", "node ready", "kubelet serving", "cni", "gpu", "vip", "api tls", "api sans", "cert sans", "cert expiry", "cert served", "manifest", "kubeconfig", "cluster object", "etcd", "etcd member", "etcd snapshot", "selector"}

func rank(check string) int {
	for i, c := range order {
		if c == check {
			return i
		}
	}
	return len(order)
}

// Write prints the table, then the causes.
func (r *Report) Write(w io.Writer) {
	sort.SliceStable(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if rank(a.Check) != rank(b.Check) {
			return rank(a.Check) < rank(b.Check)
		}
		return a.Where < b.Where
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tWHERE\tSTATUS\tDETAIL")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Check, f.Where, f.Status, f.Detail)
	}
	tw.Flush()
	if len(r.Causes) > 0 {
		fmt.Fprintln(w, "\nCAUSES:")
		for _, c := range r.Causes {
			fmt.Fprintf(w, "  - %s\n", c)
		}
	}
	failed := len(r.Failed())
	if failed == 0 {
		fmt.Fprintln(w, "\nhealthy: every check passed")
	} else {
		fmt.Fprintf(w, "\n%d check(s) failed\n", failed)
	}
}

// Run examines the cluster. It returns an error only when it could not
// run at all; problems are findings.
func Run(ctx context.Context, t Target) (*Report, error) {
	if t.Dial == nil {
		t.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	if t.Inventory == nil || t.Bundle == nil {
		return nil, fmt.Errorf("doctor needs the inventory and the secrets bundle")
	}
	r := &Report{}
	d := &doctor{t: t, r: r, nodes: map[string]*nodeFacts{}}

	// Nodes first: where each node really is decides which address the
	// API and etcd checks should find it at.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, n := range t.Inventory.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := d.probeNode(ctx, n)
			mu.Lock()
			d.nodes[n.Name] = f
			mu.Unlock()
		}()
	}
	wg.Wait()
	d.locateMoved(ctx)
	d.checkVIP()
	for _, n := range t.Inventory.Nodes {
		d.checkNode(n)
		if f := d.nodes[n.Name]; f.reached {
			d.checkSnapshots(n, f)
			d.checkOffsite(n, f)
		}
	}
	wg.Add(6)
	go func() { defer wg.Done(); d.checkNodesReady(ctx) }()
	go func() { defer wg.Done(); d.checkServing(ctx) }()
	go func() { defer wg.Done(); d.checkAPITLS(ctx) }()
	go func() { defer wg.Done(); d.checkServed(ctx) }()
	go func() { defer wg.Done(); d.checkEtcd(ctx) }()
	go func() { defer wg.Done(); d.checkAPI(ctx) }()
	wg.Wait()
	return r, nil
}

type doctor struct {
	t     Target
	r     *Report
	nodes map[string]*nodeFacts
}

// liveAddress is where a node really is: its declared address when it has
// it, else the address it was found at.
func (d *doctor) liveAddress(n inventory.Node) string {
	if f := d.nodes[n.Name]; f != nil && f.reached && f.primary != "" {
		return f.primary
	}
	return n.Address
}

func joinOr(ss []string, none string) string {
	if len(ss) == 0 {
		return none
	}
	return strings.Join(ss, ", ")
}
