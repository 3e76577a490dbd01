package drill

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/homelab-dev/homelab/roles/impact"
)

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// WriteTimeline prints one drill: its events in order, then every
// consumer's settled state, then the figures.
func WriteTimeline(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "drill: %s layout, %s powered off\n", r.Layout, r.Failed)
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
	vip := "n/a"
	switch {
	case r.Layout != "vip":
	case r.VIPFailover < 0:
		vip = "never answered again"
	case r.VIPFailover == 0:
		vip = "never stopped answering"
	default:
		vip = secs(r.VIPFailover) + " (now on " + r.VIPHolder + ")"
	}
	fmt.Fprintf(w, "VIP failover: %s\netcd: %d healthy, quorum %v; writes succeed: %v\n", vip, r.EtcdHealthy, r.Quorum, r.Writable)
	var nr []string
	for n, d := range r.NotReady {
		nr = append(nr, n+" "+secs(d))
	}
	sort.Strings(nr)
	if len(nr) == 0 {
		nr = []string{"none within the window"}
	}
	fmt.Fprintf(w, "Nodes NotReady: %s\n", strings.Join(nr, ", "))
	if r.Recovery > 0 {
		fmt.Fprintf(w, "recovery after power-on: %s\n", secs(r.Recovery))
	}
	return nil
}

// Mismatch is one cell where the prediction and the drill disagree.
type Mismatch struct {
	Consumer, Predicted, Measured string
}

// Compare holds a drill against the prediction for the same failure:
// the same consumers, at the same addresses, in the same states.
func Compare(o impact.Outcome, consumers []impact.Consumer, r *Result) []Mismatch {
	var out []Mismatch
	addr := map[string]string{}
	for _, c := range consumers {
		addr[c.ID] = c.Address
	}
	seen := map[string]bool{}
	for _, c := range r.Consumers {
		seen[c.ID] = true
		cell, ok := o.Cell(c.ID)
		if !ok {
			out = append(out, Mismatch{c.ID, "(not predicted)", r.Cells[c.ID]})
			continue
		}
		if addr[c.ID] != c.Address {
			out = append(out, Mismatch{c.ID, "address " + addr[c.ID], "address " + c.Address})
		}
		if cell.State != r.Cells[c.ID] {
			out = append(out, Mismatch{c.ID, cell.State, r.Cells[c.ID]})
		}
	}
	for _, c := range consumers {
		if !seen[c.ID] && c.Kind != impact.KindCilium {
			out = append(out, Mismatch{c.ID, "predicted", "(not found on the cluster)"})
		}
	}
	if o.Quorum != r.Quorum {
		out = append(out, Mismatch{"etcd quorum", fmt.Sprint(o.Quorum), fmt.Sprint(r.Quorum)})
	}
	if o.Writable != r.Writable {
		out = append(out, Mismatch{"writable", fmt.Sprint(o.Writable), fmt.Sprint(r.Writable)})
	}
	if o.VIP != "" && o.VIP != r.VIPHolder {
		out = append(out, Mismatch{"VIP holder", o.VIP, r.VIPHolder})
	}
	return out
}
