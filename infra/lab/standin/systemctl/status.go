package systemctl

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd"
)

// status prints systemd-252-shaped blocks and exits 0 when every unit runs,
// 3 when one does not, 4 when one does not exist.
func (c *cli) status() int {
	if len(c.opts.units) == 0 {
		host, _ := os.Hostname()
		if _, code := c.call(initd.Request{Op: "ping"}, 5*time.Second); code != exitOK {
			return code
		}
		fmt.Fprintf(c.stdout, "● %s\n    State: running\n", host)
		return exitOK
	}
	resp, code := c.call(initd.Request{Op: "status", Units: c.opts.units}, 30*time.Second)
	if resp == nil {
		return code
	}
	code = exitOK
	first := true
	for _, u := range resp.Units {
		if u.LoadState == "not-found" && u.ActiveState == "inactive" {
			fmt.Fprintf(c.stderr, "Unit %s could not be found.\n", u.Name)
			code = exitNoSuchUnit
			continue
		}
		if !first {
			fmt.Fprintln(c.stdout)
		}
		first = false
		writeStatus(c.stdout, u, time.Now(), c.opts.lines)
		if u.ActiveState != "active" && code == exitOK {
			code = exitNotRunning
		}
	}
	return code
}

func writeStatus(w io.Writer, u initd.UnitStatus, now time.Time, lines int) {
	dot := "●"
	switch u.ActiveState {
	case "inactive":
		dot = "○"
	case "failed":
		dot = "×"
	}
	head := dot + " " + u.Name
	if u.Description != "" {
		head += " - " + u.Description
	}
	fmt.Fprintln(w, head)
	switch u.LoadState {
	case "loaded":
		fmt.Fprintf(w, "     Loaded: loaded (%s; %s; preset: enabled)\n", u.FragmentPath, orDash(u.UnitFileState))
	case "masked":
		fmt.Fprintf(w, "     Loaded: masked (Reason: Unit %s is masked.)\n", u.Name)
	case "not-found":
		fmt.Fprintf(w, "     Loaded: not-found (Reason: Unit %s not found.)\n", u.Name)
	default:
		fmt.Fprintf(w, "     Loaded: %s (Reason: %s)\n", u.LoadState, u.LoadError)
	}
	writeDropIns(w, u.DropIns)

	active := u.ActiveState
	if u.SubState != u.ActiveState {
		active += " (" + u.SubState + ")"
	}
	if u.Result != "" && u.Result != "success" && u.ActiveState != "active" {
		active += " (Result: " + u.Result + ")"
	}
	if t, err := time.Parse(time.RFC3339Nano, u.Since); err == nil {
		active += " since " + stamp(t) + "; " + ago(now.Sub(t))
	}
	fmt.Fprintf(w, "     Active: %s\n", active)
	if t, err := time.Parse(time.RFC3339Nano, u.NextElapse); err == nil {
		fmt.Fprintf(w, "    Trigger: %s; %s\n", stamp(t), left(t.Sub(now)))
	} else if u.Triggers != "" && u.ActiveState == "active" {
		fmt.Fprintf(w, "    Trigger: n/a\n")
	}
	if u.Triggers != "" {
		fmt.Fprintf(w, "   Triggers: ● %s\n", u.Triggers)
	}
	if u.ConditionFail != "" {
		fmt.Fprintf(w, "  Condition: start condition failed\n             └─ %s was not met\n", u.ConditionFail)
	}
	if len(u.Documentation) > 0 {
		fmt.Fprintf(w, "       Docs: %s\n", strings.Join(u.Documentation, "\n             "))
	}
	switch {
	case u.MainPID != 0:
		fmt.Fprintf(w, "   Main PID: %d (%s)\n", u.MainPID, comm(u.ExecMain))
	case u.ExecMainPID != 0 && u.ExecMainCode != "":
		fmt.Fprintf(w, "   Main PID: %d (code=%s, status=%s)\n", u.ExecMainPID, u.ExecMainCode, initd.StatusText(u.ExecMainCode, u.ExecMainStat))
	case u.ExecMainCode != "":
		fmt.Fprintf(w, "    Process: (code=%s, status=%s)\n", u.ExecMainCode, initd.StatusText(u.ExecMainCode, u.ExecMainStat))
	}
	if u.NRestarts > 0 {
		fmt.Fprintf(w, "   Restarts: %d\n", u.NRestarts)
	}
	if len(u.Processes) > 0 {
		fmt.Fprintf(w, "     CGroup: /system.slice/%s\n", u.Name)
		for i, p := range u.Processes {
			branch := "├─"
			if i == len(u.Processes)-1 {
				branch = "└─"
			}
			fmt.Fprintf(w, "             %s%d %s\n", branch, p.PID, p.Cmdline)
		}
	}
	if u.LogFile != "" {
		if tail := tailLines(u.LogFile, lines); len(tail) > 0 {
			fmt.Fprintf(w, "\n%s:\n", u.LogFile)
			for _, l := range tail {
				fmt.Fprintln(w, l)
			}
		}
	}
}

// writeDropIns groups drop-ins by directory like systemctl does.
func writeDropIns(w io.Writer, dropIns []string) {
	label := "    Drop-In: "
	for i := 0; i < len(dropIns); {
		dir := path.Dir(dropIns[i])
		var names []string
		for ; i < len(dropIns) && path.Dir(dropIns[i]) == dir; i++ {
			names = append(names, path.Base(dropIns[i]))
		}
		fmt.Fprintf(w, "%s%s\n             └─%s\n", label, dir, strings.Join(names, ", "))
		label = "             "
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func comm(cmdline string) string {
	f := strings.Fields(cmdline)
	if len(f) == 0 {
		return "?"
	}
	return path.Base(f[0])
}

// stamp formats a time as systemd does: "Mon 2024-01-01 10:00:00 UTC".
func stamp(t time.Time) string { return t.Format("Mon 2006-01-02 15:04:05 MST") }

// ago renders a duration the way systemd's format_timespan does, coarsely.
func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms ago", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dmin %ds ago", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dmin ago", int(d.Hours()), int(d.Minutes())%60)
	}
	days := int(d.Hours()) / 24
	return fmt.Sprintf("%d days %dh ago", days, int(d.Hours())%24)
}

// tailLines returns the last n lines of a file (the journal's role).
func tailLines(file string, n int) []string {
	if n <= 0 {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	// Logs can grow large; only the end matters.
	const window = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}

// show prints KEY=VALUE properties (only those asked with -p, if any).
func (c *cli) show() int {
	units := c.opts.units
	if len(units) == 0 {
		if _, code := c.call(initd.Request{Op: "ping"}, 5*time.Second); code != exitOK {
			return code
		}
		c.printProps([][2]string{{"Version", "252"}, {"SystemState", "running"}})
		return exitOK
	}
	resp, code := c.call(initd.Request{Op: "status", Units: units}, 30*time.Second)
	if resp == nil {
		return code
	}
	for i, u := range resp.Units {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		c.printProps(properties(u))
	}
	return exitOK
}

func (c *cli) printProps(all [][2]string) {
	if len(c.opts.props) == 0 {
		for _, kv := range all {
			c.printProp(kv[0], kv[1])
		}
		return
	}
	for _, want := range c.opts.props {
		for _, kv := range all {
			if kv[0] == want {
				c.printProp(kv[0], kv[1])
			}
		}
	}
}

func (c *cli) printProp(k, v string) {
	if c.opts.value {
		fmt.Fprintln(c.stdout, v)
		return
	}
	fmt.Fprintf(c.stdout, "%s=%s\n", k, v)
}

var execCodes = map[string]string{"": "0", "exited": "1", "killed": "2", "dumped": "3"}

func properties(u initd.UnitStatus) [][2]string {
	ts := func(s string) string {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return stamp(t)
		}
		return ""
	}
	names := strings.Join(u.Names, " ")
	if names == "" {
		names = u.Name
	}
	return [][2]string{
		{"Id", u.Name},
		{"Names", names},
		{"Description", u.Description},
		{"LoadState", u.LoadState},
		{"ActiveState", u.ActiveState},
		{"SubState", u.SubState},
		{"Result", u.Result},
		{"UnitFileState", u.UnitFileState},
		{"FragmentPath", u.FragmentPath},
		{"DropInPaths", strings.Join(u.DropIns, " ")},
		{"Restart", u.Restart},
		{"MainPID", strconv.Itoa(u.MainPID)},
		{"ExecMainPID", strconv.Itoa(u.ExecMainPID)},
		{"ExecMainStartTimestamp", ts(u.ExecMainStart)},
		{"ExecMainCode", execCodes[u.ExecMainCode]},
		{"ExecMainStatus", strconv.Itoa(u.ExecMainStat)},
		{"NRestarts", strconv.Itoa(u.NRestarts)},
		{"StateChangeTimestamp", ts(u.Since)},
	}
}
