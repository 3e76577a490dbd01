package kubelet

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// cgroup2SuperMagic is statfs's f_type of a cgroup v2 (unified) mount.
const cgroup2SuperMagic = 0x63677270

// hostCgroupV1 reports whether the node's /sys/fs/cgroup is not the
// unified hierarchy, as the kubelet decides (libcontainer's
// IsCgroup2UnifiedMode): a tmpfs of v1 controllers, or hybrid, is v1.
// A variable so tests can pick the host.
var hostCgroupV1 = func() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return true
	}
	return st.Type != cgroup2SuperMagic
}

// cgroupV1Warning is what the kubelet logs when it runs on cgroup v1.
const cgroupV1Warning = "cgroup v1 support is in maintenance mode, please migrate to cgroup v2"

// failCgroupV1Default is the kubelet's default for failCgroupV1 at its
// version: false until v1.34, true from v1.35 (KEP-5573).
func failCgroupV1Default(version string) bool {
	minor := 0
	if parts := strings.Split(strings.TrimPrefix(version, "v"), "."); len(parts) > 1 && parts[0] == "1" {
		minor, _ = strconv.Atoi(parts[1])
	} else if len(parts) > 0 && parts[0] != "1" {
		return true // a v2 and later
	}
	return minor >= 35
}

// checkCgroupV1 is the kubelet's validation of its configuration on a
// cgroup v1 host (validateKubeletOSConfiguration): with failCgroupV1 (the
// config file's field or --fail-cgroupv1, else the version's default) it
// refuses to start, with the words of that version.
func checkCgroupV1(version string, failCgroupV1 *bool, cgroupV1 bool) error {
	fail := failCgroupV1Default(version)
	if failCgroupV1 != nil {
		fail = *failCgroupV1
	}
	if !fail || !cgroupV1 {
		return nil
	}
	if failCgroupV1Default(version) {
		return fmt.Errorf("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release")
	}
	return fmt.Errorf("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is in maintenance mode")
}
