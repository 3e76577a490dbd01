// Package systemctl is the node's systemctl: the subset kubeadm and the
// provisioner use, with systemd's output shapes and exit codes, talking to
// homelab init over its control socket. enable, disable, is-enabled, mask,
// unmask and cat work on unit files alone, so they also work on a node tree
// that is not running (with --root or HOMELAB_INIT_ROOT).
package systemctl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd"
	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// Exit codes systemctl uses (LSB status codes for status/is-active).
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitNotRunning  = 3
	exitNoSuchUnit  = 4
	exitNotLoadable = 5
)

type options struct {
	quiet    bool
	now      bool
	noBlock  bool
	value    bool
	lines    int
	props    []string
	root     string
	hasRoot  bool
	command  string
	units    []string
	showHelp bool
}

// cli carries what a command needs; tests swap the streams.
type cli struct {
	opts   options
	paths  unitfile.Paths
	socket string
	stdout io.Writer
	stderr io.Writer
}

// Main runs systemctl; args exclude the program name.
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	c := &cli{opts: o, stdout: stdout, stderr: stderr, paths: unitfile.DefaultPaths()}
	if o.hasRoot {
		c.paths.Root = o.root
	}
	c.socket = initd.SocketPath(c.paths)
	if o.showHelp {
		fmt.Fprintln(stdout, usage)
		return exitOK
	}
	return c.dispatch()
}

const usage = `systemctl [OPTIONS...] COMMAND [UNIT...]   (homelab node stand-in)

Unit commands: start stop restart try-restart reload reload-or-restart
  reset-failed status show is-active is-failed list-units list-timers daemon-reload
  is-system-running
Unit file commands (no daemon needed): enable disable is-enabled mask unmask cat
Options: --now --no-block -q/--quiet -p/--property=NAME --value -n/--lines=N
  --root=DIR; ignored: --no-pager --system -l/--full -a/--all --no-legend --plain`

// flags that take a value as the next argument when not written with "=".
var valueFlags = map[string]bool{"-p": true, "--property": true, "-n": true, "--lines": true,
	"--root": true, "-t": true, "--type": true, "--state": true, "-o": true, "--output": true,
	"-H": true, "--host": true, "-M": true, "--machine": true, "--signal": true, "-s": true,
	"--kill-whom": true, "--job-mode": true}

func parse(args []string) (options, error) {
	o := options{lines: 10}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			o.units = append(o.units, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if o.command == "" {
				o.command = a
			} else {
				o.units = append(o.units, a)
			}
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !hasVal && valueFlags[name] {
			if i+1 >= len(args) {
				return o, fmt.Errorf("option %s requires an argument", name)
			}
			i++
			val, hasVal = args[i], true
		}
		switch name {
		case "-q", "--quiet":
			o.quiet = true
		case "--now":
			o.now = true
		case "--no-block":
			o.noBlock = true
		case "--value":
			o.value = true
		case "-p", "--property":
			for _, p := range strings.Split(val, ",") {
				if p != "" {
					o.props = append(o.props, p)
				}
			}
		case "-n", "--lines":
			if _, err := fmt.Sscanf(val, "%d", &o.lines); err != nil {
				return o, fmt.Errorf("bad --lines value %q", val)
			}
		case "--root":
			o.root, o.hasRoot = val, true
		case "-h", "--help":
			o.showHelp = true
		case "--version":
			o.command = "--version"
		default:
			// --no-pager, --system, -l, --full, --all, --no-legend, --plain,
			// --no-ask-password, --force, --type=...: nothing to change.
		}
	}
	return o, nil
}

func (c *cli) dispatch() int {
	o := c.opts
	switch o.command {
	case "--version":
		fmt.Fprintln(c.stdout, "systemd 252 (252-homelab)\nhomelab-node systemctl stand-in")
		return exitOK
	case "is-enabled":
		return c.isEnabled()
	case "enable", "disable", "reenable":
		return c.enableDisable()
	case "mask", "unmask":
		return c.mask()
	case "cat":
		return c.cat()
	}
	if !c.needUnits() {
		return exitUsage
	}
	switch o.command {
	case "", "list-units":
		return c.listUnits()
	case "list-timers":
		return c.listTimers()
	case "start", "stop", "restart", "try-restart", "condrestart", "reload",
		"reload-or-restart", "force-reload", "reset-failed":
		return c.job()
	case "daemon-reload", "daemon-reexec":
		_, code := c.call(initd.Request{Op: "daemon-reload"}, 30*time.Second)
		return code
	case "is-active":
		return c.isActive()
	case "is-failed":
		return c.isFailed()
	case "status":
		return c.status()
	case "show":
		return c.show()
	case "is-system-running":
		if _, code := c.call(initd.Request{Op: "ping"}, 5*time.Second); code != exitOK {
			if !o.quiet {
				fmt.Fprintln(c.stdout, "offline")
			}
			return exitFailure
		}
		if !o.quiet {
			fmt.Fprintln(c.stdout, "running")
		}
		return exitOK
	}
	fmt.Fprintf(c.stderr, "Unknown command verb '%s'.\n", o.command)
	return exitFailure
}

func (c *cli) needUnits() bool {
	switch c.opts.command {
	case "start", "stop", "restart", "try-restart", "condrestart", "reload",
		"reload-or-restart", "force-reload", "is-active", "is-failed":
		if len(c.opts.units) == 0 {
			fmt.Fprintf(c.stderr, "Too few arguments.\n")
			return false
		}
	}
	return true
}

// call sends a request to init, printing the error and returning systemctl's
// exit code when it cannot be reached or refuses.
func (c *cli) call(req initd.Request, timeout time.Duration) (*initd.Response, int) {
	resp, err := initd.Call(c.socket, req, timeout)
	if err != nil {
		fmt.Fprintf(c.stderr, "systemctl: cannot talk to homelab init at %s: %v\n"+
			"(this systemctl only works inside an emulated homelab node; enable, disable and is-enabled work without it)\n",
			c.socket, err)
		return nil, exitFailure
	}
	if resp.Error != "" {
		fmt.Fprintln(c.stderr, resp.Error)
	}
	if !resp.OK {
		if resp.Code == 0 {
			return resp, exitFailure
		}
		return resp, resp.Code
	}
	return resp, exitOK
}

func (c *cli) job() int {
	op := c.opts.command
	switch op {
	case "condrestart":
		op = "try-restart"
	case "force-reload":
		op = "reload-or-restart"
	}
	_, code := c.call(initd.Request{Op: op, Units: c.opts.units, NoBlock: c.opts.noBlock}, 10*time.Minute)
	return code
}

func (c *cli) isActive() int {
	resp, code := c.call(initd.Request{Op: "is-active", Units: c.opts.units}, 30*time.Second)
	if resp == nil {
		return code
	}
	code = exitNotRunning
	for _, u := range resp.Units {
		if !c.opts.quiet {
			fmt.Fprintln(c.stdout, u.ActiveState)
		}
		if u.ActiveState == "active" {
			code = exitOK
		}
	}
	return code
}

func (c *cli) isFailed() int {
	resp, code := c.call(initd.Request{Op: "is-active", Units: c.opts.units}, 30*time.Second)
	if resp == nil {
		return code
	}
	code = exitFailure
	for _, u := range resp.Units {
		if !c.opts.quiet {
			fmt.Fprintln(c.stdout, u.ActiveState)
		}
		if u.ActiveState == "failed" {
			code = exitOK
		}
	}
	return code
}

func (c *cli) isEnabled() int {
	if len(c.opts.units) == 0 {
		fmt.Fprintln(c.stderr, "Too few arguments.")
		return exitUsage
	}
	code := exitFailure
	failed := false
	for _, u := range c.opts.units {
		state, err := unitfile.IsEnabled(c.paths, u)
		if err != nil {
			msg := err.Error()
			if errors.Is(err, unitfile.ErrNotFound) {
				msg = "No such file or directory"
			}
			fmt.Fprintf(c.stderr, "Failed to get unit file state for %s: %s\n", unitfile.Normalize(u), msg)
			failed = true
			continue
		}
		if !c.opts.quiet {
			fmt.Fprintln(c.stdout, state)
		}
		if unitfile.EnabledState(state) {
			code = exitOK
		}
	}
	if failed {
		return exitFailure
	}
	return code
}

func (c *cli) enableDisable() int {
	if len(c.opts.units) == 0 {
		fmt.Fprintln(c.stderr, "Too few arguments.")
		return exitUsage
	}
	ops := []string{c.opts.command}
	if ops[0] == "reenable" {
		ops = []string{"disable", "enable"}
	}
	for _, op := range ops {
		f := unitfile.Enable
		if op == "disable" {
			f = unitfile.Disable
		}
		for _, u := range c.opts.units {
			changes, err := f(c.paths, u)
			if !c.opts.quiet {
				for _, ch := range changes {
					fmt.Fprintln(c.stderr, ch)
				}
			}
			if err != nil {
				fmt.Fprintf(c.stderr, "Failed to %s unit: %v\n", op, err)
				return exitFailure
			}
		}
	}
	// Like systemd, enabling implies a reload; without a running init
	// there is nothing to tell.
	if _, err := os.Stat(c.socket); err == nil || c.opts.now {
		if _, code := c.call(initd.Request{Op: "daemon-reload"}, 30*time.Second); code != exitOK && c.opts.now {
			return code
		}
	}
	if c.opts.now {
		op := "start"
		if c.opts.command == "disable" {
			op = "stop"
		} else if c.opts.command == "reenable" {
			op = "restart"
		}
		_, code := c.call(initd.Request{Op: op, Units: c.opts.units, NoBlock: c.opts.noBlock}, 10*time.Minute)
		return code
	}
	return exitOK
}

func (c *cli) mask() int {
	if len(c.opts.units) == 0 {
		fmt.Fprintln(c.stderr, "Too few arguments.")
		return exitUsage
	}
	for _, u := range c.opts.units {
		f := unitfile.Mask
		if c.opts.command == "unmask" {
			f = unitfile.Unmask
		}
		changes, err := f(c.paths, u)
		for _, ch := range changes {
			fmt.Fprintln(c.stderr, ch)
		}
		if err != nil {
			fmt.Fprintln(c.stderr, err)
			return exitFailure
		}
	}
	return exitOK
}

func (c *cli) cat() int {
	code := exitOK
	for i, u := range c.opts.units {
		def, err := unitfile.Load(c.paths, u)
		if err != nil {
			fmt.Fprintf(c.stderr, "No files found for %s.\n", unitfile.Normalize(u))
			code = exitFailure
			continue
		}
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		for j, f := range append([]string{def.FragmentPath}, def.DropIns...) {
			data, err := os.ReadFile(c.paths.Path(f))
			if err != nil {
				continue
			}
			if j > 0 {
				fmt.Fprintln(c.stdout)
			}
			fmt.Fprintf(c.stdout, "# %s\n%s", f, data)
		}
	}
	return code
}

func (c *cli) listUnits() int {
	resp, code := c.call(initd.Request{Op: "list"}, 30*time.Second)
	if resp == nil {
		return code
	}
	width := len("UNIT")
	for _, u := range resp.Units {
		width = max(width, len(u.Name))
	}
	fmt.Fprintf(c.stdout, "  %-*s %-10s %-12s %-12s %s\n", width, "UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION")
	for _, u := range resp.Units {
		fmt.Fprintf(c.stdout, "  %-*s %-10s %-12s %-12s %s\n", width, u.Name, u.LoadState, u.ActiveState, u.SubState, u.Description)
	}
	fmt.Fprintf(c.stdout, "\n%d loaded units listed.\n", len(resp.Units))
	return exitOK
}
