package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine is what the node reports about itself that does not change while
// the kubelet runs.
type Machine struct {
	Info        corev1.NodeSystemInfo
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
}

// DetectMachine reads the machine's facts. rootDir is the kubelet's root
// directory, whose filesystem is reported as ephemeral storage.
func DetectMachine(rootDir string, maxPods int) Machine {
	if maxPods <= 0 {
		maxPods = 110
	}
	var m Machine
	m.Info.MachineID = firstLine("/etc/machine-id", "/var/lib/dbus/machine-id")
	m.Info.SystemUUID = firstLine("/sys/class/dmi/id/product_uuid")
	m.Info.BootID = firstLine("/proc/sys/kernel/random/boot_id")
	m.Info.KernelVersion = kernelVersion()
	m.Info.OSImage = osImage()

	memKiB := memTotalKiB()
	storage := diskBytes(rootDir)
	m.Capacity = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memKiB*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(storage, resource.BinarySI),
		"hugepages-2Mi":                 *resource.NewQuantity(0, resource.BinarySI),
		"hugepages-1Gi":                 *resource.NewQuantity(0, resource.BinarySI),
	}
	// The kubelet's default hard eviction thresholds.
	m.Allocatable = m.Capacity.DeepCopy()
	m.Allocatable[corev1.ResourceMemory] = *resource.NewQuantity(max(memKiB*1024-100<<20, 0), resource.BinarySI)
	m.Allocatable[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(storage/10*9, resource.DecimalSI)
	return m
}

func firstLine(paths ...string) string {
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
	}
	return ""
}

func kernelVersion() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func osImage() string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				if u, err := strconv.Unquote(v); err == nil {
					return u
				}
				return strings.Trim(v, `"'`)
			}
		}
	}
	return "Linux"
}

func memTotalKiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var n int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &n)
			return n
		}
	}
	return 0
}

func diskBytes(dir string) int64 {
	// The root dir may not exist yet; its nearest ancestor is on the same
	// filesystem in all likelihood.
	var st syscall.Statfs_t
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if syscall.Statfs(d, &st) == nil {
			return int64(st.Blocks) * st.Bsize
		}
		if d == "/" || d == "." {
			return 0
		}
	}
}
