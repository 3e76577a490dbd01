package systemctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd"
)

// listTimers prints the running timers as systemd 252 does: soonest first,
// then those with no next elapse.
func (c *cli) listTimers() int {
	resp, code := c.call(initd.Request{Op: "list"}, 30*time.Second)
	if resp == nil {
		return code
	}
	now := time.Now()
	type row struct {
		next                               time.Time
		nextS, left, last, passed, unit, t string
	}
	var rows []row
	for _, u := range resp.Units {
		if !strings.HasSuffix(u.Name, ".timer") || u.ActiveState != "active" {
			continue
		}
		r := row{nextS: "-", left: "-", last: "-", passed: "-", unit: u.Name, t: u.Triggers}
		if t, err := time.Parse(time.RFC3339Nano, u.NextElapse); err == nil {
			r.next, r.nextS, r.left = t, stamp(t), strings.TrimSuffix(left(t.Sub(now)), " left")
		}
		if t, err := time.Parse(time.RFC3339Nano, u.LastTrigger); err == nil {
			r.last, r.passed = stamp(t), strings.TrimSuffix(ago(now.Sub(t)), " ago")
		}
		rows = append(rows, r)
	}
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && before(rows[j].next, rows[j-1].next); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
	fmt.Fprintf(c.stdout, "%-28s %-10s %-28s %-10s %-36s %s\n", "NEXT", "LEFT", "LAST", "PASSED", "UNIT", "ACTIVATES")
	for _, r := range rows {
		fmt.Fprintf(c.stdout, "%-28s %-10s %-28s %-10s %-36s %s\n", r.nextS, r.left, r.last, r.passed, r.unit, r.t)
	}
	fmt.Fprintf(c.stdout, "\n%d timers listed.\n", len(rows))
	return exitOK
}

// before orders times with the zero time (no next elapse) last.
func before(a, b time.Time) bool {
	if a.IsZero() {
		return false
	}
	return b.IsZero() || a.Before(b)
}

// left renders time until an event, as systemd does ("4min 59s left").
func left(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strings.TrimSuffix(ago(d), " ago") + " left"
}
