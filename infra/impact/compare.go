package impact

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles"
	"github.com/homelab-dev/homelab/roles/pki"
)

// ForInventory renders the (already validated) inventory and predicts
// every failure in its layout.
func ForInventory(inv *inventory.Inventory, b *pki.Bundle) (*Prediction, error) {
	c, err := ReadInventory(inv, b)
	if err != nil {
		return nil, err
	}
	return c.Predict(), nil
}

// ReadInventory renders the (already validated) inventory and reads the
// cluster from the render, to evaluate failures one by one.
func ReadInventory(inv *inventory.Inventory, b *pki.Bundle) (*Cluster, error) {
	r, err := roles.Render(inv, b)
	if err != nil {
		return nil, err
	}
	return Read(inv, r)
}

// groups are the table's consumer columns: one per kind, so a 7-node
// cluster fits a terminal; JSON and the SVG keep every consumer.
var groups = []struct{ kind, title string }{
	{KindKubectl, "kubectl (admin.conf)"},
	{KindClusterInfo, "joins (cluster-info)"},
	{KindKubeProxy, "kube-proxy"},
	{KindCilium, "cilium"},
	{KindKubelet, "kubelets"},
	{KindControllerManager, "controller-managers"},
	{KindScheduler, "schedulers"},
	{KindEtcd, "apiserver→etcd"},
}

func (p *Prediction) kindOf() map[string]string {
	m := map[string]string{}
	for _, c := range p.Consumers {
		m[c.ID] = c.Kind
	}
	return m
}

func (p *Prediction) columns() []struct{ kind, title string } {
	present := map[string]bool{}
	for _, c := range p.Consumers {
		present[c.Kind] = true
	}
	var out []struct{ kind, title string }
	for _, g := range groups {
		if present[g.kind] {
			out = append(out, g)
		}
	}
	return out
}

// groupCell condenses one kind's cells: "ok" when all agree, else counts
// with the lost consumers named ("down: gpu-1 gpu-2").
func groupCell(o Outcome, kinds map[string]string, kind string) string {
	by := map[string][]string{}
	for _, c := range o.Cells {
		if kinds[c.Consumer] != kind {
			continue
		}
		name := c.Consumer
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		by[c.State] = append(by[c.State], name)
	}
	if len(by) == 1 {
		for st := range by {
			return label(st)
		}
	}
	var parts []string
	for _, s := range []string{Down, Manual, Gone, OK} {
		if len(by[s]) == 0 {
			continue
		}
		if s == OK {
			parts = append(parts, fmt.Sprintf("ok %d", len(by[s])))
			continue
		}
		parts = append(parts, label(s)+" "+strings.Join(by[s], ","))
	}
	return strings.Join(parts, "; ")
}

// label shouts the states that lose something, so they stand out in a table.
func label(state string) string {
	switch state {
	case Down, Manual:
		return strings.ToUpper(state)
	}
	return state
}

// dataCells says how many members are healthy (and up, when that
// differs) and what can be done with the data.
func dataCells(o Outcome, cps int) (etcd, data string) {
	etcd = fmt.Sprintf("%d/%d healthy", o.Healthy, cps)
	if o.Members != o.Healthy {
		etcd += fmt.Sprintf(", %d up", o.Members)
	}
	if !o.Quorum {
		etcd += ", NO QUORUM"
	}
	data = o.Data
	if data != DataWritable {
		data = strings.ToUpper(data)
	}
	return
}

// vipCell says who the LAN reaches through the VIP, any split brain, and
// where the VIP goes once the failed nodes are back.
func vipCell(o Outcome) string {
	v := o.VIP
	if v == "" {
		v = "-"
	}
	if o.SplitBrain() {
		v += " (SPLIT BRAIN: on " + strings.Join(o.VIPHolders, " and ") + ")"
	}
	if o.Handback() {
		v += ", back to " + o.VIPAfter
	}
	return v
}

func (p *Prediction) cps() int {
	n := 0
	for _, c := range p.Consumers {
		if c.Kind == KindEtcd {
			n++
		}
	}
	return n
}

func (p *Prediction) header() []string {
	h := []string{"failure", "etcd", "data"}
	if p.Layout == inventory.LayoutVIP {
		h = append(h, "VIP on")
	}
	for _, g := range p.columns() {
		h = append(h, g.title)
	}
	return h
}

func (p *Prediction) rows() [][]string {
	kinds := p.kindOf()
	var out [][]string
	for _, o := range p.Outcomes {
		etcd, wr := dataCells(o, p.cps())
		row := []string{o.Failure.ID, etcd, wr}
		if p.Layout == inventory.LayoutVIP {
			row = append(row, vipCell(o))
		}
		for _, g := range p.columns() {
			row = append(row, groupCell(o, kinds, g.kind))
		}
		out = append(out, row)
	}
	return out
}

// WriteTable prints each layout as an aligned terminal table.
func WriteTable(w io.Writer, ps []*Prediction) error {
	for i, p := range ps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "layout %s, endpoint %s", p.Layout, p.Endpoint)
		if p.VIPHolder != "" {
			fmt.Fprintf(w, ", VIP on %s while healthy", p.VIPHolder)
		}
		fmt.Fprintln(w)
		for _, r := range p.Risks() {
			fmt.Fprintf(w, "  risk: %s (%s) %s\n", r.ID, r.Address, r.Risk)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(p.header(), "\t"))
		for _, r := range p.rows() {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown prints each layout as a Markdown section with its table,
// its risks and the address every consumer uses.
func WriteMarkdown(w io.Writer, ps []*Prediction) error {
	for _, p := range ps {
		fmt.Fprintf(w, "### %s (endpoint `%s`)\n\n", p.Layout, p.Endpoint)
		if p.VIPHolder != "" {
			fmt.Fprintf(w, "The VIP sits on %s while everything is healthy.\n\n", p.VIPHolder)
		}
		h := p.header()
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(h, " | "), strings.Repeat("---|", len(h)))
		for _, r := range p.rows() {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		fmt.Fprintln(w)
		if risks := p.Risks(); len(risks) > 0 {
			fmt.Fprintf(w, "Risks:\n\n")
			for _, r := range risks {
				fmt.Fprintf(w, "- `%s` uses `%s`: %s\n", r.ID, r.Address, r.Risk)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "<details><summary>Where each consumer's address comes from</summary>\n\n| consumer | address | source |\n|---|---|---|\n")
		for _, c := range p.Consumers {
			fmt.Fprintf(w, "| %s | `%s` | %s |\n", c.ID, c.Address, c.Source)
		}
		fmt.Fprintf(w, "\n</details>\n\n")
	}
	return nil
}

// WriteJSON prints every cell.
func WriteJSON(w io.Writer, ps []*Prediction) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(ps)
}

// Lost lists, per failure, the consumers that live but lost the API: the
// seed's "alive but nobody finds the door".
func (p *Prediction) Lost() map[string][]string {
	out := map[string][]string{}
	for _, o := range p.Outcomes {
		for _, c := range o.Cells {
			if c.State == Down {
				out[o.Failure.ID] = append(out[o.Failure.ID], c.Consumer)
			}
		}
		sort.Strings(out[o.Failure.ID])
	}
	return out
}
