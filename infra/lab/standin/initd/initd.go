// Package initd is PID 1 of an emulated node: a small service manager that
// reads systemd unit files, starts what multi-user.target wants, supervises
// and restarts units, reaps every orphan, and takes systemctl's requests on
// a unix socket (see Request). It does no mount or namespace setup: the lab
// did that before exec'ing it.
//
// Where things are, on the node: units in /etc/systemd/system,
// /run/systemd/system, /usr/lib/systemd/system, /lib/systemd/system (with
// NAME.service.d/*.conf drop-ins); each unit's stdout and stderr appended to
// /var/log/homelab/NAME.log; the control socket /run/homelab-init.sock.
// --root DIR (or HOMELAB_INIT_ROOT) puts all of these under DIR; the
// commands the units run are not relocated.
//
// Units run with PATH, LANG and init's own HOMELAB_* variables, then their
// Environment= and EnvironmentFile= settings. Each main process leads its
// own process group, which is what stop signals: a process that called
// setsid (a static pod) outlives its unit.
package initd

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// Main runs init; args exclude the program name. Flags:
//
//	--root DIR        relocate unit dirs, env files, logs and /run (default $HOMELAB_INIT_ROOT)
//	--socket PATH     control socket (default $HOMELAB_INIT_SOCKET or ROOT/run/homelab-init.sock)
//	--stop-timeout D  cap on TimeoutStopSec (default 5s)
//	--no-boot         do not start the enabled units
func Main(args []string) int {
	return run(args, os.Stderr)
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", os.Getenv(unitfile.RootEnv), "directory holding the node's files")
	socket := fs.String("socket", "", "control socket path")
	stopCap := fs.Duration("stop-timeout", 5*time.Second, "longest wait before SIGKILL on stop")
	noBoot := fs.Bool("no-boot", false, "do not start the units enabled for multi-user.target")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if os.Getpid() != 1 && (*root == "" || *root == "/") {
		// Booting the machine's own /etc/systemd/system would start its
		// services (sshd, postgresql...) a second time, outside any node.
		fmt.Fprintln(stderr, "homelab-init: refusing to run: not PID 1 of a node; pass --root DIR to supervise the units under DIR")
		return 1
	}
	p := unitfile.Paths{Root: *root}
	m := NewManager(p)
	m.StopTimeoutCap = *stopCap
	m.Log.SetOutput(stderr)

	// Outside a PID namespace (tests, debugging) orphans would go to the
	// real init; being a subreaper keeps them ours either way.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		m.logf("cannot become a subreaper: %v", err)
	}
	// Handled before anything starts so no early SIGTERM is lost (as PID 1
	// an unhandled one would be ignored anyway).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	stopReaper := make(chan struct{})
	go m.reaper.run(stopReaper)

	path := *socket
	if path == "" {
		path = SocketPath(p)
	}
	l, err := Listen(path)
	if err != nil {
		fmt.Fprintf(stderr, "homelab-init: control socket: %v\n", err)
		return 1
	}
	go m.Serve(l)
	m.logf("pid %d, root %q, socket %s", os.Getpid(), *root, path)
	if !*noBoot {
		m.Boot()
	}
	for sig := range sigs {
		if sig == unix.SIGHUP {
			m.DaemonReload()
			continue
		}
		m.logf("%v: stopping all units", sig)
		break
	}
	m.Shutdown()
	_ = l.Close()
	_ = os.Remove(path)
	close(stopReaper)
	m.logf("stopped")
	return 0
}
