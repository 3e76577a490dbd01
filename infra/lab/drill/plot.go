package drill

import (
	"fmt"
	"html"
	"io"
	"time"
)

// WriteSVG plots drills' timelines on one time axis, a row per event, a
// band per drill, so several drills of the same failure can be read side
// by side (how long access was gone, when the VIP moved, when it all came
// back). Hand-built SVG: no plotting library, nothing fetched.
func WriteSVG(w io.Writer, results []*Result) error {
	const (
		left, right, rowH, top, axisH = 420, 40, 16, 30, 40
		width                         = 1100
	)
	var span time.Duration
	rows := 0
	for _, r := range results {
		rows += len(r.Timeline) + 1
		for _, e := range r.Timeline {
			span = max(span, e.At)
		}
	}
	if span <= 0 {
		span = time.Second
	}
	height := top + rows*rowH + axisH
	x := func(d time.Duration) float64 {
		return left + float64(width-left-right)*d.Seconds()/span.Seconds()
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	y := top
	for i, r := range results {
		fmt.Fprintf(w, `<text x="4" y="%d" font-weight="bold">drill %d: %s layout, %s</text>`+"\n", y+12, i+1, html.EscapeString(r.Layout), html.EscapeString(describe(r.Failure)))
		y += rowH
		for _, e := range r.Timeline {
			fmt.Fprintf(w, `<text x="4" y="%d">%s</text>`+"\n", y+12, html.EscapeString(truncate(e.What, 62)))
			fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", left, y+8, x(e.At), y+8)
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%d" r="4" fill="#c0392b"><title>%s at %s</title></circle>`+"\n", x(e.At), y+8, html.EscapeString(e.What), secs(e.At))
			y += rowH
		}
	}
	// Time axis with a tick per second (or per five on long windows).
	step := time.Second
	if span > 30*time.Second {
		step = 5 * time.Second
	}
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, y+4, width-right, y+4)
	for t := time.Duration(0); t <= span; t += step {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/><text x="%.1f" y="%d" text-anchor="middle">%gs</text>`+"\n",
			x(t), y+4, x(t), y+9, x(t), y+22, t.Seconds())
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">seconds after the failure</text>`+"\n", (left+width-right)/2, y+36)
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
