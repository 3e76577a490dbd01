package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// labPSS is the memory the lab holds: the proportional set size of every
// process in a network namespace other than the machine's own (each node's
// sshd, etcd, control plane, kubelet and runtime stand-ins, keepalived).
// Shared pages count once across the lab, split between their users,
// which is what RSS would count several times over.
func labPSS() (int64, error) {
	// The bench runs in the machine's namespace (PID 1's may not be
	// readable: it can belong to a container's manager).
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return 0, err
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	var total int64
	n := 0
	for _, d := range dirs {
		ns, err := os.Readlink(d + "/ns/net")
		if err != nil || ns == host {
			continue // gone, a kernel thread, or not the lab's
		}
		kb, err := pssOf(d + "/smaps_rollup")
		if err != nil {
			continue
		}
		total += kb << 10
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("no process found in a lab namespace")
	}
	return total, nil
}

// pssOf reads the Pss line of a smaps_rollup file, in kB.
func pssOf(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no Pss line", path)
}
