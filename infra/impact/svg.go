package impact

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// Colours of the heat-map: one per state, readable in print too.
var stateColour = map[string]string{
	OK:     "#4caf50",
	Down:   "#e53935",
	Gone:   "#9e9e9e",
	Manual: "#fb8c00",
	NA:     "#eeeeee",
}

const (
	svgCell   = 14
	svgLeft   = 250
	svgTop    = 130
	svgGap    = 36
	svgFont   = `font-family="sans-serif" font-size="11"`
	svgLegend = 22
)

// WriteSVG draws a heat-map: one block per layout, a row per failure, a
// column per consumer, plus the data columns (etcd quorum; writable, read-only or unavailable). Built
// by hand so the docs' picture needs no network, no fonts, no tool.
func WriteSVG(w io.Writer, ps []*Prediction) error {
	cols := 0
	for _, p := range ps {
		cols = max(cols, len(p.Consumers))
	}
	width := svgLeft + (cols+3)*svgCell + 120 // rotated headers lean right
	height := svgTop + svgLegend
	for _, p := range ps {
		height += (len(p.Outcomes)+1)*svgCell + svgGap
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="8" y="16" %s font-weight="bold">What each failure does to data (etcd, writes) and to every API consumer, per layout</text>`+"\n", svgFont)
	x0 := svgLeft
	// Legend.
	lx := 8
	for _, s := range []string{OK, Down, Gone, Manual, NA} {
		fmt.Fprintf(&b, `<rect x="%d" y="26" width="12" height="12" fill="%s" stroke="#555" stroke-width="0.5"/><text x="%d" y="36" %s>%s</text>`+"\n", lx, stateColour[s], lx+16, svgFont, html.EscapeString(stateLegend(s)))
		lx += 16 + 7*len(stateLegend(s)) + 14
	}
	// Column headers from the first layout (every layout has the same
	// consumers, in the same order, but for Cilium versus kube-proxy).
	head := []string{"etcd quorum", "data"}
	for _, c := range ps[0].Consumers {
		head = append(head, c.ID)
	}
	for i, h := range head {
		x := x0 + i*svgCell + svgCell/2
		if i >= 2 {
			x += svgCell
		}
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-60)" %s>%s</text>`+"\n", x+3, svgTop-4, svgFont, html.EscapeString(h))
	}
	y := svgTop
	for _, p := range ps {
		fmt.Fprintf(&b, `<text x="8" y="%d" %s font-weight="bold">%s — endpoint %s</text>`+"\n", y+11, svgFont, html.EscapeString(p.Layout), html.EscapeString(p.Endpoint))
		y += svgCell
		for _, o := range p.Outcomes {
			fmt.Fprintf(&b, `<text x="16" y="%d" %s>%s</text>`+"\n", y+11, svgFont, html.EscapeString(o.Failure.ID))
			data := []struct {
				ok   bool
				what string
			}{
				{o.Quorum, fmt.Sprintf("%d/%d members healthy, %d up", o.Healthy, p.cps(), o.Members)},
				{o.Data == DataWritable, o.Data},
			}
			for i, d := range data {
				col := stateColour[OK]
				if !d.ok {
					col = stateColour[Down]
				}
				if len(o.Cells) > 0 && o.Cells[0].State == NA {
					col = stateColour[NA]
				}
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="white"><title>%s</title></rect>`+"\n", x0+i*svgCell, y, svgCell, svgCell, col, html.EscapeString(p.Layout+" / "+o.Failure.ID+" / "+head[i]+": "+d.what))
			}
			for i, c := range o.Cells {
				why := c.State
				if c.Why != "" {
					why += ": " + c.Why
				}
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="white"><title>%s</title></rect>`+"\n", x0+(i+3)*svgCell, y, svgCell, svgCell, stateColour[c.State], html.EscapeString(p.Layout+" / "+o.Failure.ID+" / "+c.Consumer+": "+why))
			}
			y += svgCell
		}
		y += svgGap
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func stateLegend(s string) string {
	switch s {
	case OK:
		return "answers"
	case Down:
		return "alive, no API"
	case Gone:
		return "not running"
	case Manual:
		return "after a DNS change"
	}
	return "not applicable"
}
