package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/homelab-dev/homelab/infra/netns"
)

// gatewayServer is a server the lab runs in its gateway namespace, where
// every node reaches it and nothing outside the lab can: the lab's own
// binary, re-executed with env, whose package init() serves, or another
// program (argv: the S3 server).
type gatewayServer struct {
	what string // for messages: "the apt repository's server"
	env  string // NAME=VALUE that makes the re-executed binary serve
	// argv, when set, is another program to run instead, with more
	// environment in argvEnv (secrets go there, never into argv).
	argv    []string
	argvEnv []string
	nsPath  string
	addr    string // where it answers, in nsPath
	log     string
}

// startGatewayServer starts g, records it in *slot (saved in the state
// before it is waited for, so down stops it whatever happens next), and
// waits until it answers.
func (l *Lab) startGatewayServer(ctx context.Context, s *State, slot **Proc, g gatewayServer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(g.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", "--net="+g.nsPath, "--", exe)
	cmd.Env = []string{g.env, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if len(g.argv) > 0 {
		cmd = exec.Command("nsenter", append([]string{"--net=" + g.nsPath, "--"}, g.argv...)...)
		cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, g.argvEnv...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", g.what, err)
	}
	go cmd.Wait()
	p, err := procOf(cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("%s died at once; see %s", g.what, g.log)
	}
	*slot = p
	if err := l.saveState(s); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := netns.Dial(ctx, g.nsPath, "tcp", g.addr)
		if err == nil {
			c.Close()
			return nil
		}
		if !p.Alive() || time.Now().After(deadline) {
			return fmt.Errorf("%s does not answer on %s in %s: %w (see %s)", g.what, g.addr, g.nsPath, err, g.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopGatewayServer kills the server in *slot, if any, and forgets it.
func stopGatewayServer(slot **Proc, what string) error {
	p := *slot
	if p == nil {
		return nil
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("stopping %s (pid %d): %w", what, p.PID, err)
	}
	if err := waitGone(5*time.Second, func() int {
		if p.Alive() {
			return 1
		}
		return 0
	}); err != nil {
		return fmt.Errorf("%s outlived SIGKILL", what)
	}
	*slot = nil
	return nil
}
