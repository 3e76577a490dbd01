package drill

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/homelab-dev/homelab/infra/impact"
)

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// describe says what a failure did, for headings.
func describe(f impact.Failure) string {
	on := strings.Join(f.Nodes, " and ")
	switch f.Kind {
	case impact.FailOff:
		return on + " powered off"
	case impact.FailCut:
		return on + " cut off the network"
	case impact.FailKeepalived:
		return "keepalived killed on " + on
	case impact.FailAPIServer:
		return "kube-apiserver stopped on " + on
	}
	return f.ID
}

// failoverText says when the API answered through the endpoint again.
func failoverText(r *Result) string {
	switch {
	case r.EndpointUnknown:
		return "n/a (the endpoint is a name)"
	case r.Failover < 0:
		return "not within the window"
	case r.Failover == 0:
		return "never stopped answering"
	}
	return fmt.Sprintf("%s (silent %s)", secs(r.Failover), secs(r.Silent))
}

// WriteTimeline prints one drill: its events in order, then every
// consumer's settled state, then the figures.
func WriteTimeline(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "drill: %s layout, %s\n", r.Layout, describe(r.Failure))
	if r.NotApplicable != "" {
		fmt.Fprintf(w, "not applicable: %s\n", r.NotApplicable)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "t\tevent")
	for _, e := range r.Timeline {
		fmt.Fprintf(tw, "%s\t%s\n", secs(e.At), e.What)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "consumer\taddress\tat the end of the window")
	for _, c := range r.Consumers {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.ID, c.Address, r.Cells[c.ID])
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "API through the endpoint again: %s", failoverText(r))
	if r.Failure.Kind == impact.FailAPIServer && r.Failover > 0 {
		fmt.Fprintf(w, " (%s after the apiserver stopped answering at %s)", secs(r.Failover-r.Effective), secs(r.Effective))
	}
	fmt.Fprintln(w)
	if r.Layout == "vip" {
		fmt.Fprintf(w, "VIP: the LAN reaches %s; on the interfaces of %s", orNone(r.VIPHolder), orNone(strings.Join(r.VIPHolders, " and ")))
		if r.VIPMoved > 0 {
			fmt.Fprintf(w, "; another node took it at %s", secs(r.VIPMoved))
		}
		fmt.Fprintln(w)
		brains := 0
		for _, sp := range r.Splits {
			if sp.Handover {
				fmt.Fprintf(w, "handover: %s both held the VIP at %s (under one advert interval)\n", strings.Join(sp.Holders, " and "), secs(sp.From))
				continue
			}
			brains++
			fmt.Fprintf(w, "SPLIT BRAIN: %s held the VIP at once from %s to %s\n", strings.Join(sp.Holders, " and "), secs(sp.From), secs(sp.To))
		}
		if brains == 0 {
			fmt.Fprintln(w, "split brain: none in any sample")
		}
	}
	fmt.Fprintf(w, "etcd: %d healthy, %d answer, quorum %v; writes succeed: %v; data %s\n", r.EtcdHealthy, r.EtcdUp, r.Quorum, r.Writable, r.Data)
	var nr []string
	for n, d := range r.NotReady {
		nr = append(nr, n+" "+secs(d))
	}
	sort.Strings(nr)
	if len(nr) == 0 {
		nr = []string{"none"}
	}
	fmt.Fprintf(w, "Nodes NotReady: %s\n", strings.Join(nr, ", "))
	if r.Restored > 0 {
		fmt.Fprintf(w, "recovery after the restore: %s\n", secs(r.Recovery))
	}
	if h := r.Handback; h != nil {
		if h.At == 0 {
			fmt.Fprintf(w, "handback: none, the VIP stayed on %s\n", orNone(h.To))
		} else {
			fmt.Fprintf(w, "handback: %s -> %s %s after the restore, endpoint silent %s around it\n", orNone(h.From), orNone(h.To), secs(h.At), secs(h.Gap))
		}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no node"
	}
	return s
}

// Check is one cell of the comparison between compare's prediction and a
// drill.
type Check struct {
	Item      string `json:"item"`
	Predicted string `json:"predicted"`
	Measured  string `json:"measured"`
}

// Differs reports a mismatch.
func (c Check) Differs() bool { return c.Predicted != c.Measured }

// Compare holds a drill against the prediction for the same failure, cell
// by cell: every consumer's address and state, etcd's members up and
// healthy, quorum, writes and what can be done with the data, and (vip)
// who the LAN reaches through the VIP, every holder of it, any split brain
// the prediction does not have, and the holder after recovery.
func Compare(o impact.Outcome, consumers []impact.Consumer, r *Result) []Check {
	var out []Check
	add := func(item, predicted, measured string) {
		out = append(out, Check{Item: item, Predicted: predicted, Measured: measured})
	}
	addr := map[string]string{}
	for _, c := range consumers {
		addr[c.ID] = c.Address
	}
	seen := map[string]bool{}
	for _, c := range r.Consumers {
		seen[c.ID] = true
		cell, ok := o.Cell(c.ID)
		if !ok {
			add(c.ID, "(not predicted)", r.Cells[c.ID])
			continue
		}
		add(c.ID+" address", addr[c.ID], c.Address)
		add(c.ID, cell.State, r.Cells[c.ID])
	}
	for _, c := range consumers {
		if !seen[c.ID] && c.Kind != impact.KindCilium {
			add(c.ID, "predicted", "(not found on the cluster)")
		}
	}
	add("etcd members up", fmt.Sprint(o.Members), fmt.Sprint(r.EtcdUp))
	add("etcd members healthy", fmt.Sprint(o.Healthy), fmt.Sprint(r.EtcdHealthy))
	add("etcd quorum", fmt.Sprint(o.Quorum), fmt.Sprint(r.Quorum))
	add("writable", fmt.Sprint(o.Writable), fmt.Sprint(r.Writable))
	add("data", o.Data, r.Data)
	if o.VIP == "" && r.Layout != "vip" {
		return out
	}
	if r.NotApplicable != "" {
		return out
	}
	add("VIP: the LAN reaches", o.VIP, r.VIPHolder)
	add("VIP on the interfaces of", strings.Join(o.VIPHolders, " "), strings.Join(r.VIPHolders, " "))
	// A split the prediction has is the failure's steady state (a killed
	// keepalived's address left behind); any other is a split brain.
	var unexpected []string
	for _, sp := range r.Splits {
		if sp.Handover {
			continue
		}
		during := r.Restored == 0 || sp.From < r.Restored
		if !o.SplitBrain() || !during || strings.Join(sp.Holders, " ") != strings.Join(o.VIPHolders, " ") {
			unexpected = append(unexpected, fmt.Sprintf("%s %s-%s", strings.Join(sp.Holders, "+"), secs(sp.From), secs(sp.To)))
		}
	}
	add("split brain beyond the prediction", "none", strings.Join(orNoneList(unexpected), ", "))
	if r.Handback != nil {
		add("VIP after recovery", o.VIPAfter, r.Handback.To)
	}
	return out
}

func orNoneList(s []string) []string {
	if len(s) == 0 {
		return []string{"none"}
	}
	return s
}

// Mismatches keeps the checks that differ.
func Mismatches(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Differs() {
			out = append(out, c)
		}
	}
	return out
}

// WriteComparison prints every check, the differing ones marked.
func WriteComparison(w io.Writer, o impact.Outcome, checks []Check) error {
	fmt.Fprintf(w, "compare's prediction for %q: %d cells, %d differ\n", o.Failure.ID, len(checks), len(Mismatches(checks)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tcell\tpredicted\tmeasured")
	for _, c := range checks {
		mark := ""
		if c.Differs() {
			mark = "≠"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, c.Item, c.Predicted, c.Measured)
	}
	return tw.Flush()
}
