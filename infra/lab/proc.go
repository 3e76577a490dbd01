package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Proc names a process by PID and start time, so a recycled PID is never
// mistaken for a lab process and killed.
type Proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// procStat returns a process's state letter, parent and start time.
func procStat(pid int) (state byte, ppid int, start uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	// The command name may hold spaces and parentheses: fields follow the
	// last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0, 0, 0, fmt.Errorf("odd /proc/%d/stat", pid)
	}
	ppid, _ = strconv.Atoi(f[1])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], ppid, start, nil
}

func procOf(pid int) (*Proc, error) {
	_, _, start, err := procStat(pid)
	if err != nil {
		return nil, err
	}
	return &Proc{PID: pid, Start: start}, nil
}

// Alive reports whether the process still runs. A zombie counts as dead:
// this machine's PID 1 does not reap orphans, so a killed node's processes
// may linger as zombies, holding no memory and no namespaces.
func (p *Proc) Alive() bool {
	if p == nil || p.PID <= 0 {
		return false
	}
	state, _, start, err := procStat(p.PID)
	return err == nil && start == p.Start && state != 'Z' && state != 'X'
}

// Kill sends SIGKILL if the process is still the one recorded.
func (p *Proc) Kill() error {
	if !p.Alive() {
		return nil
	}
	err := syscall.Kill(p.PID, syscall.SIGKILL)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// nsInode returns the inode of a process's namespace of that kind.
func nsInode(pid int, kind string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// allPIDs lists the processes of this PID namespace.
func allPIDs() []int {
	all, _ := procfs.AllProcs()
	out := make([]int, 0, len(all))
	for _, p := range all {
		out = append(out, p.PID)
	}
	return out
}

// pidsInNS lists the live processes in the PID namespace with that inode.
func pidsInNS(inode uint64) []int {
	if inode == 0 {
		return nil
	}
	var out []int
	for _, pid := range allPIDs() {
		if ino, err := nsInode(pid, "pid"); err == nil && ino == inode {
			if state, _, _, err := procStat(pid); err == nil && state != 'Z' {
				out = append(out, pid)
			}
		}
	}
	return out
}

// childOf finds a live child of ppid.
func childOf(ppid int) int {
	for _, pid := range allPIDs() {
		if _, pp, _, err := procStat(pid); err == nil && pp == ppid {
			return pid
		}
	}
	return 0
}

// waitGone waits until cond reports nothing left, or the timeout.
func waitGone(timeout time.Duration, left func() int) error {
	deadline := time.Now().Add(timeout)
	for {
		n := left()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still running after %s", n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pssKiB returns a process's proportional set size: shared pages (the
// same kube-apiserver binary on three nodes) are split between sharers,
// so the sum over processes is the memory the lab really holds.
func pssKiB(pid int) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Pss:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				return v
			}
		}
	}
	return 0
}

// procName returns the command name of a process.
func procName(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}
