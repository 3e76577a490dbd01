package lab

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/inventory"
)

// The lab runs every node on the machine's few cores, and a real homelab
// does not: there a worker's work never takes a control-plane machine's
// CPU. Left to the kernel's fairness per process, twenty-five workers
// joining at once took the two cores from the control-plane join beside
// them (cp-2's join: 14 s alone, 106 s beside them; docs/benchmarks.md),
// which measured the lab, not the provisioner. So each node runs in a CPU
// cgroup of its own, under one for its role: the control-plane nodes
// together weigh cpuSharesControlPlane, the workers together
// cpuSharesWorkers, and a busy control plane gets the cores first. The
// scheduler still lends idle CPU to anyone, so a worker is slowed only
// while a control plane is busy. The provisioner's own processes (Pulumi,
// the provider, ssh) stay where they were started, each weighing 1024
// against the whole lab's cpuSharesLab: a busy lab had dozens of
// processes against their few, and keeps most of the cores.
const (
	cpuSharesLab          = 16384
	cpuSharesControlPlane = 4096
	cpuSharesWorkers      = 1024
	// cpuHierarchy is cgroup v1's cpu controller. Without it (cgroup v2,
	// or a machine that does not let root make groups) the nodes share
	// the cores per process (docs/lab.md).
	cpuHierarchy = "/sys/fs/cgroup/cpu"
)

// cpuGroup is the cgroup a node runs in: <hierarchy>/<lab>/<role>/<node>,
// where <lab> is the lab directory's name, so two labs' nodes never share
// a group.
func (l *Lab) cpuGroup(n *NodeState) string {
	role := "workers"
	if n.Role == inventory.RoleControlPlane {
		role = "control-plane"
	}
	return filepath.Join(l.cpuTop(), role, n.Name)
}

func (l *Lab) cpuTop() string {
	name := filepath.Base(l.Dir)
	if !strings.HasPrefix(name, "homelab") {
		name = "homelab-" + name
	}
	return filepath.Join(cpuHierarchy, name)
}

// ensureCPUGroup makes n's group and the weights above it; "" when the
// machine has no cgroup v1 cpu controller, or will not let root make a
// group in it: the node then boots without one, and the lab says why.
func (l *Lab) ensureCPUGroup(n *NodeState) string {
	if _, err := os.Stat(filepath.Join(cpuHierarchy, "cpu.shares")); err != nil {
		return ""
	}
	g := l.cpuGroup(n)
	shares := cpuSharesWorkers
	if n.Role == inventory.RoleControlPlane {
		shares = cpuSharesControlPlane
	}
	err := os.MkdirAll(g, 0o755)
	for dir, shares := range map[string]int{l.cpuTop(): cpuSharesLab, filepath.Dir(g): shares} {
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(strconv.Itoa(shares)), 0o644)
		}
	}
	if err != nil {
		l.logf("lab: %s shares the cores per process, with no CPU group: %v", n.Name, err)
		return ""
	}
	return g
}

// removeCPUGroups removes the lab's groups once its nodes are gone. A
// node's last processes can take a moment to be reaped after its PID 1
// died; a group still busy after that is left, and named, without failing
// the lab's removal: an empty group costs nothing, and the next lab of
// the same directory uses it again.
func (l *Lab) removeCPUGroups() {
	top := l.cpuTop()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var dirs []string
		err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return err
		})
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		var left []string
		for i := len(dirs) - 1; i >= 0; i-- { // leaves first
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				left = append(left, dirs[i])
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			l.logf("lab: CPU groups still in use, left in place: %v", left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// joinCPUGroup moves the booting node's PID 1, and so everything it
// starts, into its group ("0": the writing process).
func joinCPUGroup(group string) error {
	if group == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte("0"), 0o644)
}
