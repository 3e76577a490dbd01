package drill

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Figures condense the drills of one failure: what docs/layouts.md
// reports.
type Figures struct {
	Layout  string `json:"layout"`
	Failure string `json:"failure"`
	Drills  int    `json:"drills"`
	// Failover: when the API answered through the endpoint again, per
	// drill whose endpoint stopped (Never: drills where it never stopped;
	// Lost: drills where it did not come back within the window).
	Failover []time.Duration `json:"failover"`
	Silent   []time.Duration `json:"silent"`
	Never    int             `json:"neverStopped"`
	// VIPMoved: when another node took the VIP, per drill where one did.
	VIPMoved []time.Duration `json:"vipMoved,omitempty"`
	Lost     int             `json:"notBackInWindow"`
	// NotReady: per Node, when it turned NotReady, one entry per drill
	// that saw it.
	NotReady map[string][]time.Duration `json:"notReady,omitempty"`
	// HandbackAt and HandbackGap: per drill whose VIP moved after recovery.
	HandbackAt  []time.Duration `json:"handbackAt,omitempty"`
	HandbackGap []time.Duration `json:"handbackGap,omitempty"`
	// SplitDrills counts drills that saw a split brain (two holders for
	// longer than a handover), Handovers the handover overlaps seen.
	SplitDrills int `json:"splitDrills"`
	Handovers   int `json:"handovers"`
}

// Summarize groups results by layout and failure, in order of first
// appearance.
func Summarize(results []*Result) []Figures {
	var out []Figures
	index := map[string]int{}
	for _, r := range results {
		key := r.Layout + "\x00" + r.Failure.ID
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, Figures{Layout: r.Layout, Failure: r.Failure.ID, NotReady: map[string][]time.Duration{}})
		}
		f := &out[i]
		f.Drills++
		switch {
		case r.EndpointUnknown:
		case r.Failover < 0:
			f.Lost++
		case r.Failover == 0:
			f.Never++
		default:
			f.Failover = append(f.Failover, r.Failover)
			f.Silent = append(f.Silent, r.Silent)
		}
		if r.VIPMoved > 0 {
			f.VIPMoved = append(f.VIPMoved, r.VIPMoved)
		}
		for n, d := range r.NotReady {
			f.NotReady[n] = append(f.NotReady[n], d)
		}
		if h := r.Handback; h != nil && h.At > 0 {
			f.HandbackAt = append(f.HandbackAt, h.At)
			f.HandbackGap = append(f.HandbackGap, h.Gap)
		}
		brain := false
		for _, sp := range r.Splits {
			if sp.Handover {
				f.Handovers++
			} else {
				brain = true
			}
		}
		if brain {
			f.SplitDrills++
		}
	}
	return out
}

// P50 is the lower median; Max the largest. Both 0 for no values.
func P50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// Max is the largest duration, 0 for none.
func Max(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func p50max(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f / %.2f s", P50(ds).Seconds(), Max(ds).Seconds())
}

// WriteSummary prints one row per failure: the figures over its drills.
func WriteSummary(w io.Writer, figs []Figures) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "layout\tfailure\tdrills\tAPI through the endpoint again, p50 / max\tendpoint silent, p50 / max\tVIP moved, p50 / max\tNodes NotReady (p50)\thandback at, p50 / max\thandback gap, p50 / max\tsplit brain")
	for _, f := range figs {
		fo := p50max(f.Failover)
		var extra []string
		if f.Never > 0 {
			extra = append(extra, fmt.Sprintf("%d never stopped", f.Never))
		}
		if f.Lost > 0 {
			extra = append(extra, fmt.Sprintf("%d not back in the window", f.Lost))
		}
		if len(extra) > 0 {
			fo += " (" + strings.Join(extra, ", ") + ")"
		}
		var nr []string
		for _, n := range sortedNames(f.NotReady) {
			nr = append(nr, fmt.Sprintf("%s %.0f s (%d/%d)", n, P50(f.NotReady[n]).Seconds(), len(f.NotReady[n]), f.Drills))
		}
		if len(nr) == 0 {
			nr = []string{"none"}
		}
		split := "none"
		if f.SplitDrills > 0 {
			split = fmt.Sprintf("in %d/%d drills", f.SplitDrills, f.Drills)
		}
		if f.Handovers > 0 {
			split += fmt.Sprintf(" (%d handover overlaps)", f.Handovers)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Layout, f.Failure, f.Drills, fo, p50max(f.Silent), p50max(f.VIPMoved), strings.Join(nr, ", "), p50max(f.HandbackAt), p50max(f.HandbackGap), split)
	}
	return tw.Flush()
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
