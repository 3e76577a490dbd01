package lab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// envBoot carries the boot spec's path to the process unshare starts. The
// package's init() acts on it, so any binary linking this package (the
// homelab CLI, a test binary) can boot a node by re-executing itself.
const envBoot = envvars.LabBoot

// nodeInit is the node's PID 1 once its mounts are in place.
var nodeInit = []string{"/usr/local/bin/homelab-node", "init"}

// bootSpec is what a node's boot needs, written by the lab before each boot.
type bootSpec struct {
	Node     string    `json:"node"`
	Hostname string    `json:"hostname"`
	Overlays []overlay `json:"overlays"`
	// Hide are directories covered by an empty read-only tmpfs: the lab
	// directory holds every node's disk.
	Hide []string `json:"hide"`
	Init []string `json:"init"`

	// A real node (System systemd) boots from its own root instead of the
	// machine's: Root is where it is assembled, Rootfs the installed
	// system whose top level it copies, Plain the directories bound from
	// the disk, Cgroups the node's cgroup in every hierarchy.
	Systemd bool        `json:"systemd,omitempty"`
	Root    string      `json:"root,omitempty"`
	Rootfs  string      `json:"rootfs,omitempty"`
	Plain   []bind      `json:"plain,omitempty"`
	Cgroups []hierarchy `json:"cgroups,omitempty"`
}

type bind struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

type overlay struct {
	Target string   `json:"target"`
	Lower  []string `json:"lower"` // highest first, as overlayfs lists them
	Upper  string   `json:"upper"`
	Work   string   `json:"work"`
}

func init() {
	spec := os.Getenv(envBoot)
	if spec == "" || os.Getpid() != 1 {
		return
	}
	err := Boot(spec)
	fmt.Fprintf(os.Stderr, "homelab-lab boot: %v\n", err)
	os.Exit(1)
}

// Boot turns the current process, PID 1 of fresh mount, UTS and PID
// namespaces inside a node's network namespace, into the node: its own
// /etc /var /opt /usr /root, a private /run /tmp /dev/shm and ptys, its own
// sysfs (showing the node's links, not the machine's), /proc/sys read-only
// but for /proc/sys/net, its hostname; then it executes the node's init.
// It only returns on failure.
func Boot(specPath string) error {
	if os.Getpid() != 1 {
		// Mounting over /etc in the machine's own mount namespace would
		// wreck it: only ever run as a fresh namespace's PID 1.
		return fmt.Errorf("refusing to boot: not PID 1 of a new PID namespace (run by `homelab-lab up`)")
	}
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec bootSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("boot spec %s: %w", specPath, err)
	}
	if spec.Systemd {
		return bootSystemd(&spec, specPath)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		// Nothing mounted here may reach the machine or another node.
		{"private mounts", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		// The copies of /run/netns/* would pin every other node's network
		// namespace for as long as this node lives.
		{"detach /run", func() error { return detachUnder("/run") }},
		{"overlays", func() error { return mountOverlays(spec.Overlays) }},
		{"tmpfs", mountTmpfs},
		{"sysfs", remountSysfs},
		{"devpts", mountDevpts},
		{"/proc/sys", readOnlySysctls},
		{"hide", func() error { return hide(spec.Hide) }},
		{"hostname", func() error { return unix.Sethostname([]byte(spec.Hostname)) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %s: %w", spec.Node, s.what, err)
		}
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
		"TERM=linux",
	}
	return syscall.Exec(spec.Init[0], spec.Init, env)
}

// mountPoints lists mount points at or under dir, deepest first.
func mountPoints(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func detachUnder(dir string) error {
	mps, err := mountPoints(dir)
	if err != nil {
		return err
	}
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	return nil
}

func mountOverlays(ovs []overlay) error {
	for _, o := range ovs {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(o.Lower, ":"), o.Upper, o.Work)
		if err := unix.Mount("overlay", o.Target, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay on %s (%s): %w", o.Target, opts, err)
		}
	}
	return nil
}

func mountTmpfs() error {
	for _, m := range []struct{ dir, opts string }{
		{"/run", "mode=755,size=256m"},
		{"/tmp", "mode=1777,size=1g"},
		{"/dev/shm", "mode=1777,size=256m"},
	} {
		if err := unix.Mount("tmpfs", m.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.opts); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", m.dir, err)
		}
	}
	// sshd's privilege separation directory and the lock directory a
	// systemd machine would have made.
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"/run/sshd", 0o755}, {"/run/lock", 0o1777}, {"/run/systemd", 0o755}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// remountSysfs mounts a sysfs of the node's network namespace, so
// /sys/class/net lists the node's links (not the machine's real NIC), and
// moves the machine's cgroup mounts onto it: kubeadm's SystemVerification
// reads them.
func remountSysfs() error {
	hold := "/run/.hl-cgroup"
	if err := os.Mkdir(hold, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("/sys/fs/cgroup", hold, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("holding cgroups: %w", err)
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := unix.Mount(hold, "/sys/fs/cgroup", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving cgroups back: %w", err)
	}
	return os.Remove(hold)
}

// mountDevpts gives the node its own pty numbering, as its own kernel would.
func mountDevpts() error {
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620,gid=5"); err != nil {
		return err
	}
	return unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, "")
}

// readOnlySysctls makes /proc/sys read-only except /proc/sys/net: vm.*,
// kernel.* and fs.* are the machine's, net.* are the node's own. The net
// bind must come first: a bind of a read-only mount is read-only too, while
// remounting /proc/sys leaves the mount below it alone.
func readOnlySysctls() error {
	if err := unix.Mount("/proc/sys", "/proc/sys", "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if err := unix.Mount("/proc/sys/net", "/proc/sys/net", "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", "/proc/sys", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

func hide(dirs []string) error {
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=4k"); err != nil {
			return fmt.Errorf("hiding %s: %w", d, err)
		}
	}
	return nil
}
