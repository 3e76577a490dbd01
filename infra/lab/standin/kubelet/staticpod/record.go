package staticpod

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultStateDir is where the kubelet stand-in records the static pod
// processes it runs, so that a restarted kubelet (or the CRI stand-in, on
// kubeadm reset) can find them.
const DefaultStateDir = "/var/lib/kubelet/standin/pods"

// Record describes a running static pod process. It is stored as
// STATEDIR/NAME.json.
type Record struct {
	Name      string    `json:"name"`
	Manifest  string    `json:"manifest"`
	Hash      string    `json:"hash"`
	PID       int       `json:"pid"`
	StartTime uint64    `json:"startTime"`
	Argv      []string  `json:"argv"`
	Started   time.Time `json:"started"`
}

// Alive reports whether the recorded process still runs. The start time and
// the command line guard against a reused PID.
func (r Record) Alive() bool {
	if r.PID <= 0 || !alive(r.PID, r.StartTime) {
		return false
	}
	argv, err := readCmdline(r.PID)
	return err == nil && slices.Equal(argv, r.Argv)
}

// Stop ends the recorded process and its process group: SIGTERM, then
// SIGKILL after grace.
func (r Record) Stop(grace time.Duration) {
	if !r.Alive() {
		return
	}
	terminate(r.PID, grace, func() bool { return !alive(r.PID, r.StartTime) })
}

// LoadRecords reads all records in dir. A missing dir means no records.
func LoadRecords(dir string) ([]Record, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r Record
		if json.Unmarshal(b, &r) != nil || r.Name == "" {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// RemoveRecord deletes the record of the named pod.
func RemoveRecord(dir, name string) error {
	err := os.Remove(recordPath(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func saveRecord(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	// Written atomically: a kubelet killed mid-write must not lose track of
	// a running process.
	tmp := recordPath(dir, r.Name) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, recordPath(dir, r.Name))
}

func recordPath(dir, name string) string {
	return filepath.Join(dir, name+".json")
}

// ProcessStartTime is pid's start time in clock ticks after boot (what
// Record.StartTime holds), to tell it from a later process of that PID.
func ProcessStartTime(pid int) (uint64, error) {
	st, err := readProcStat(pid)
	return st.startTime, err
}
