package initd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/standin/initd/unitfile"
)

// SocketEnv overrides where the control socket lives.
const SocketEnv = envvars.InitSocket

// SocketName is the control socket's file name in the node's /run.
const SocketName = "homelab-init.sock"

// SocketPath is $HOMELAB_INIT_SOCKET, else /run/homelab-init.sock under p.
func SocketPath(p unitfile.Paths) string {
	if s := os.Getenv(SocketEnv); s != "" {
		return s
	}
	return filepath.Join(p.RunDir(), SocketName)
}

// Request is one line of JSON sent to init; one Response line comes back
// and the connection closes.
//
//	{"op":"restart","units":["kubelet"]}
//	{"ok":true,"units":[{"name":"kubelet.service","active_state":"active",...}]}
//
// Ops: start, stop, restart, try-restart, reload, reload-or-restart,
// reset-failed, enable, disable, is-active, is-enabled, status, list,
// daemon-reload, ping. "units" may use short names or aliases.
type Request struct {
	Op    string   `json:"op"`
	Units []string `json:"units,omitempty"`
	// NoBlock returns from start/restart as soon as the job is queued.
	NoBlock bool `json:"no_block,omitempty"`
}

// Response answers a Request. Error holds systemctl-style messages, one per
// failed unit; Code is the exit status systemctl should use.
type Response struct {
	OK      bool         `json:"ok"`
	Code    int          `json:"code,omitempty"`
	Error   string       `json:"error,omitempty"`
	Units   []UnitStatus `json:"units,omitempty"`
	Changes []string     `json:"changes,omitempty"`
}

// UnitStatus is what systemctl status/show/is-active print.
type UnitStatus struct {
	Name          string   `json:"name"` // canonical, or as asked when not found
	Names         []string `json:"names,omitempty"`
	LoadState     string   `json:"load_state"` // loaded, not-found, masked, bad-setting
	LoadError     string   `json:"load_error,omitempty"`
	Description   string   `json:"description,omitempty"`
	Documentation []string `json:"documentation,omitempty"`
	FragmentPath  string   `json:"fragment_path,omitempty"`
	DropIns       []string `json:"drop_ins,omitempty"`
	UnitFileState string   `json:"unit_file_state,omitempty"`
	ActiveState   string   `json:"active_state"` // active, activating, deactivating, inactive, failed
	SubState      string   `json:"sub_state"`    // running, exited, start-pre, auto-restart, stop-sigterm, dead, failed
	Result        string   `json:"result"`       // success, exit-code, signal, core-dump, timeout, resources
	Since         string   `json:"since,omitempty"`
	MainPID       int      `json:"main_pid,omitempty"`
	ExecMainPID   int      `json:"exec_main_pid,omitempty"`
	ExecMainStart string   `json:"exec_main_start,omitempty"`
	ExecMainCode  string   `json:"exec_main_code,omitempty"` // exited, killed, dumped
	ExecMainStat  int      `json:"exec_main_status,omitempty"`
	ExecMain      string   `json:"exec_main,omitempty"` // the command line last run
	ConditionFail string   `json:"condition_failed,omitempty"`
	NRestarts     int      `json:"n_restarts,omitempty"`
	Restart       string   `json:"restart,omitempty"`
	LogFile       string   `json:"log_file,omitempty"`
	Processes     []Proc   `json:"processes,omitempty"`
	// A timer's: the unit it activates, when it elapses next and when it
	// last did (RFC 3339, "" for never).
	Triggers    string `json:"triggers,omitempty"`
	NextElapse  string `json:"next_elapse,omitempty"`
	LastTrigger string `json:"last_trigger,omitempty"`
}

// Proc is one process of the unit's process group.
type Proc struct {
	PID     int    `json:"pid"`
	Cmdline string `json:"cmdline"`
}

// Call sends one request to init's socket.
func Call(socket string, req Request, timeout time.Duration) (*Response, error) {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if timeout > 0 {
		_ = conn.SetDeadline(time.Now().Add(timeout))
	}
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("reading init's answer: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("decoding init's answer: %w", err)
	}
	return &resp, nil
}
