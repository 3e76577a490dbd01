package initd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// Serve answers control requests on a unix socket until the listener is
// closed.
func (m *Manager) Serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				m.logf("accept: %v", err)
			}
			return
		}
		go m.serveConn(conn)
	}
}

// Listen binds the control socket, replacing a stale one.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(path, 0o600)
	return l, nil
}

func (m *Manager) serveConn(conn net.Conn) {
	defer conn.Close()
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return
	}
	var req Request
	var resp Response
	if err := json.Unmarshal(line, &req); err != nil {
		resp = Response{Code: 1, Error: "bad request: " + err.Error()}
	} else {
		resp = m.Handle(req)
	}
	b, _ := json.Marshal(resp)
	_, _ = conn.Write(append(b, '\n'))
}

// Handle executes one request; exported so tests and in-process callers can
// skip the socket.
func (m *Manager) Handle(req Request) Response {
	resp := Response{OK: true}
	var errs []string
	fail := func(err error) {
		errs = append(errs, err.Error())
		resp.Code = errCode(err)
	}
	each := func(f func(string) error) {
		for _, u := range req.Units {
			if err := f(u); err != nil {
				fail(err)
			}
		}
	}
	switch req.Op {
	case "ping":
	case "start":
		each(func(u string) error { return m.Start(u, !req.NoBlock) })
	case "stop":
		each(m.Stop)
	case "restart":
		each(func(u string) error { return m.Restart(u, !req.NoBlock, false) })
	case "try-restart":
		each(func(u string) error { return m.Restart(u, !req.NoBlock, true) })
	case "reload":
		each(m.Reload)
	case "reload-or-restart":
		each(func(u string) error {
			if err := m.Reload(u); err == nil {
				return nil
			}
			return m.Restart(u, !req.NoBlock, false)
		})
	case "reset-failed":
		each(func(u string) error { m.ResetFailed(u); return nil })
	case "daemon-reload":
		m.DaemonReload()
	case "enable", "disable":
		each(func(u string) error {
			f := unitfile.Enable
			if req.Op == "disable" {
				f = unitfile.Disable
			}
			ch, err := f(m.Paths, u)
			for _, c := range ch {
				resp.Changes = append(resp.Changes, c.String())
			}
			if err != nil {
				return fmt.Errorf("Failed to %s unit: %v", req.Op, err)
			}
			return nil
		})
	case "is-active", "status":
		for _, u := range req.Units {
			resp.Units = append(resp.Units, m.Status(u))
		}
	case "is-enabled":
		for _, u := range req.Units {
			st := UnitStatus{Name: unitfile.Normalize(u)}
			state, err := unitfile.IsEnabled(m.Paths, u)
			if err != nil {
				fail(fmt.Errorf("Failed to get unit file state for %s: %v", st.Name, err))
				continue
			}
			st.UnitFileState = state
			resp.Units = append(resp.Units, st)
		}
	case "list":
		resp.Units = m.List()
	default:
		fail(fmt.Errorf("unknown operation %q", req.Op))
	}
	if len(errs) > 0 {
		resp.OK = false
		resp.Error = strings.Join(errs, "\n")
	}
	return resp
}
