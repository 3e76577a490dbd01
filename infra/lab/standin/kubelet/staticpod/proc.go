package staticpod

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat holds the fields of /proc/PID/stat that tell a process apart from
// a later one that got the same PID.
type procStat struct {
	state     byte
	pgid      int
	startTime uint64 // clock ticks after boot
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name may contain spaces and parentheses; the fields that
	// follow it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, err
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, err
	}
	return procStat{state: f[0][0], pgid: pgid, startTime: start}, nil
}

func readCmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// alive reports whether pid is still the process that was started at
// startTime. A zombie counts as dead: once a re-adopted process exits it is
// the node's init that reaps it, not us.
func alive(pid int, startTime uint64) bool {
	st, err := readProcStat(pid)
	if err != nil {
		return false
	}
	if st.state == 'Z' || st.state == 'X' {
		return false
	}
	return startTime == 0 || st.startTime == startTime
}

// signalGroup signals the process group led by pid, or only pid when it does
// not lead its own group (so we never hit unrelated processes).
func signalGroup(pid int, sig syscall.Signal) error {
	if st, err := readProcStat(pid); err == nil && st.pgid == pid {
		if err := syscall.Kill(-pid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return syscall.Kill(pid, sig)
}

// terminate sends SIGTERM, then SIGKILL after grace, and waits for exited
// to report the end. exited must become true eventually once the process is
// gone.
func terminate(pid int, grace time.Duration, exited func() bool) {
	if exited() {
		return
	}
	_ = signalGroup(pid, syscall.SIGTERM)
	if waitFor(exited, grace) {
		// The group may still hold children of the leader.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return
	}
	_ = signalGroup(pid, syscall.SIGKILL)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	waitFor(exited, 5*time.Second)
}

func waitFor(cond func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
