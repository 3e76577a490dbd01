package lab

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// A node's System is what runs as its PID 1: the stand-in init over the
// machine's own directories (the default), or a Debian 12 machine booted
// for real, systemd as PID 1, containerd, runc and the real kubelet, from
// the root filesystem infra/tools/build-rootfs.sh installs (issue 30).
const (
	SystemStandIn = ""
	SystemSystemd = "systemd"
)

// systemdInit is a real node's PID 1, as the kernel would start it.
var systemdInit = []string{"/lib/systemd/systemd"}

// envBootStage marks the second exec of a real node's boot: PID 1 has
// joined its cgroups and entered its own cgroup namespace.
const envBootStage = envvars.LabBootStage

// kubeletSysctls are the kernel settings the kubelet insists on
// (protectKernelDefaults off: it writes them when they differ, and fails
// when it cannot). They are the machine's, and a node must never change
// them (a kernel oops would then panic the machine): each is a file of the
// node bound over the /proc/sys entry, holding the value the kubelet wants.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// plainDirs are bound from the node's disk as plain directories, not
// through the overlay: containerd's overlayfs snapshotter refuses an
// overlay as its upper directory, and the kubelet's volumes and its
// filesystem statistics expect a real filesystem.
var plainDirs = []string{"/var/lib/containerd", "/var/lib/kubelet"}

func (l *Lab) plainDir(node, dir string) string {
	return filepath.Join(l.diskDir(node), "plain", strings.ReplaceAll(strings.Trim(dir, "/"), "/", "-"))
}

// rootMount is where a real node's new root is assembled before pivot_root.
func (l *Lab) rootMount(node string) string { return filepath.Join(l.nodeDir(node), "root") }

// hierarchy is one cgroup hierarchy of the machine as a node mounts it.
type hierarchy struct {
	// Dir is the hierarchy's directory under /sys/fs/cgroup (cpu,cpuacct;
	// systemd; unified), Type cgroup or cgroup2, Options its mount options
	// (the controllers, or none,name=systemd).
	Dir     string `json:"dir"`
	Type    string `json:"type"`
	Options string `json:"options"`
	// Host is the node's cgroup directory on the machine.
	Host string `json:"host"`
}

// hostHierarchies lists the machine's cgroup hierarchies as mounted, with
// the directory named cgroup a node gets in each: under the calling
// process's own cgroup of that hierarchy (never at a hierarchy's root: the
// machine's own services live there). The name is the lab's (Names.Node),
// so two labs' nodes of one name get cgroups of their own.
func hostHierarchies(cgroup string) ([]hierarchy, error) {
	own := map[string]string{} // controllers (or name=X, or "" for v2) -> path
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []hierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - TYPE SOURCE SUPER
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 {
			continue
		}
		mp, typ := unescapeMount(lf[4]), rf[0]
		if filepath.Dir(mp) != "/sys/fs/cgroup" || (typ != "cgroup" && typ != "cgroup2") {
			continue
		}
		h := hierarchy{Dir: filepath.Base(mp), Type: typ}
		key := ""
		if typ == "cgroup" {
			var ctrls []string
			// The super options are the controllers (or name=X) and
			// the hierarchy's flags, which a node's mount does not take.
			for _, o := range strings.Split(rf[2], ",") {
				switch {
				case o == "rw" || o == "ro" || o == "clone_children" || o == "noprefix" || o == "xattr" || strings.HasPrefix(o, "release_agent="):
				default:
					ctrls = append(ctrls, o)
				}
			}
			key = strings.Join(ctrls, ",")
			h.Options = key
			if strings.HasPrefix(key, "name=") {
				h.Options = "none," + key
			}
		}
		path, ok := own[key]
		if !ok {
			return nil, fmt.Errorf("cgroup hierarchy %s (%s) is not in /proc/self/cgroup", mp, key)
		}
		h.Host = filepath.Join(mp, path, cgroup)
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy under /sys/fs/cgroup")
	}
	return out, sc.Err()
}

// makeCgroups creates the node's cgroup in every hierarchy. A cpuset
// cgroup starts with no CPUs and no memory nodes, and nothing can join it
// until it has its parent's.
func makeCgroups(hs []hierarchy) error {
	for _, h := range hs {
		if err := os.MkdirAll(h.Host, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", h.Host, err)
		}
		if strings.Contains(","+h.Options+",", ",cpuset,") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(h.Host), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(h.Host, f), v, 0o644); err != nil {
					return fmt.Errorf("%s/%s: %w", h.Host, f, err)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes what the node's systemd made under its cgroups,
// deepest first, then the cgroups themselves. Empty cgroups are all that
// remains once every process of the node is gone.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, top := range dirs {
		var all []string
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, p)
			}
			return nil
		})
		slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
		for _, d := range all {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// bootSystemd is a real node's boot, in two stages of the same PID 1. The
// first joins the node's cgroups (moving PID 1 alone: moving its parent on
// the machine too makes systemd fail to migrate its controllers) and
// re-executes itself in a new cgroup namespace, where those cgroups are
// the root. The second assembles the node's root (the rootfs's layers under
// the node's disk, its own /proc, /sys, /dev, /run, cgroup mounts), pivots
// into it and executes systemd.
func bootSystemd(spec *bootSpec, specPath string) error {
	if os.Getenv(envBootStage) != "2" {
		for _, h := range spec.Cgroups {
			if err := os.WriteFile(filepath.Join(h.Host, "cgroup.procs"), []byte("0"), 0o644); err != nil {
				return fmt.Errorf("%s: joining %s: %w", spec.Node, h.Host, err)
			}
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			return err
		}
		env := append(os.Environ(), envBootStage+"=2")
		return syscall.Exec(unshare, []string{"unshare", "--cgroup", exe, "boot", specPath}, env)
	}
	root := spec.Root
	steps := []struct {
		what string
		do   func() error
	}{
		{"private mounts", func() error { return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") }},
		{"root", func() error { return mountRoot(root, spec.Rootfs) }},
		{"overlays", func() error { return mountOverlays(under(root, spec.Overlays)) }},
		{"plain directories", func() error { return bindPlain(root, spec.Plain) }},
		{"/run and /tmp", func() error { return mountRunTmp(root) }},
		{"/proc", func() error { return mountProc(root) }},
		{"/sys", func() error { return mountSys(root, spec.Cgroups) }},
		{"/dev", func() error { return mountDev(root) }},
		{"hostname", func() error { return unix.Sethostname([]byte(spec.Hostname)) }},
		{"pivot_root", func() error { return pivot(root) }},
		{"console", startConsole},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %s: %w", spec.Node, s.what, err)
		}
	}
	env := []string{"container=homelab-lab", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return syscall.Exec(spec.Init[0], spec.Init, env)
}

func under(root string, ovs []overlay) []overlay {
	out := make([]overlay, len(ovs))
	for i, o := range ovs {
		o.Target = filepath.Join(root, o.Target)
		out[i] = o
	}
	return out
}

// mountRoot makes root a small tmpfs holding the rootfs's top level: its
// directories empty (the overlays and pseudo-filesystems go on them) and
// its symlinks (/bin -> usr/bin on a merged-/usr Debian) as they are.
func mountRoot(root, rootfs string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "mode=755,size=16m"); err != nil {
		return err
	}
	entries, err := os.ReadDir(rootfs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src := filepath.Join(rootfs, e.Name())
		dst := filepath.Join(root, e.Name())
		st, err := os.Lstat(src)
		if err != nil {
			return err
		}
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case st.IsDir():
			if err := os.Mkdir(dst, st.Mode().Perm()); err != nil {
				return err
			}
			if err := os.Chmod(dst, st.Mode().Perm()|st.Mode()&os.ModeSticky); err != nil {
				return err
			}
		}
	}
	return nil
}

func bindPlain(root string, binds []bind) error {
	for _, b := range binds {
		dst := filepath.Join(root, b.Target)
		for _, d := range []string{b.Source, dst} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		if err := unix.Mount(b.Source, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.Source, b.Target, err)
		}
	}
	return nil
}

func mountRunTmp(root string) error {
	for _, m := range []struct{ dir, opts string }{
		{"run", "mode=755,size=256m"},
		{"tmp", "mode=1777,size=1g"},
	} {
		dst := filepath.Join(root, m.dir)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.opts); err != nil {
			return fmt.Errorf("tmpfs on /%s: %w", m.dir, err)
		}
	}
	return nil
}

// mountProc mounts the node's /proc (its own PID namespace), read-only
// sysctls but for net.*, and the kubelet's sysctls as files of the node.
func mountProc(root string) error {
	proc := filepath.Join(root, "proc")
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	sys := filepath.Join(proc, "sys")
	if err := unix.Mount(sys, sys, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if err := unix.Mount(filepath.Join(sys, "net"), filepath.Join(sys, "net"), "", unix.MS_BIND, ""); err != nil {
		return err
	}
	if err := unix.Mount("", sys, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	held := filepath.Join(root, "run", "homelab-lab", "sysctl")
	if err := os.MkdirAll(held, 0o755); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(kubeletSysctls)) {
		target := filepath.Join(sys, k)
		if _, err := os.Stat(target); err != nil {
			continue // not on this kernel
		}
		f := filepath.Join(held, strings.ReplaceAll(k, "/", "."))
		if err := os.WriteFile(f, []byte(kubeletSysctls[k]+"\n"), 0o644); err != nil {
			return err
		}
		if err := unix.Mount(f, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind over /proc/sys/%s: %w", k, err)
		}
	}
	// The machine's sysrq would reach the machine.
	if _, err := os.Stat(filepath.Join(proc, "sysrq-trigger")); err == nil {
		if err := unix.Mount("/dev/null", filepath.Join(proc, "sysrq-trigger"), "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return nil
}

// mountSys mounts a read-only sysfs of the node's network namespace and,
// on a tmpfs made read-only afterwards, each cgroup hierarchy as the node
// sees it: rooted at its own cgroup, through its cgroup namespace.
func mountSys(root string, hs []hierarchy) error {
	sys := filepath.Join(root, "sys")
	if err := unix.Mount("sysfs", sys, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	cg := filepath.Join(sys, "fs", "cgroup")
	if err := unix.Mount("tmpfs", cg, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=4m"); err != nil {
		return err
	}
	for _, h := range hs {
		dst := filepath.Join(cg, h.Dir)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("cgroup", dst, h.Type, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, h.Options); err != nil {
			return fmt.Errorf("%s on /sys/fs/cgroup/%s: %w", h.Type, h.Dir, err)
		}
		// systemd looks for cpu and cpuacct under their own names too.
		if strings.Contains(h.Dir, ",") {
			for _, c := range strings.Split(h.Dir, ",") {
				if err := os.Symlink(h.Dir, filepath.Join(cg, c)); err != nil && !errors.Is(err, os.ErrExist) {
					return err
				}
			}
		}
	}
	return unix.Mount("", cg, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=4m")
}

// mountDev gives the node a /dev of its own: the harmless character
// devices bound from the machine, its own ptys, shm, and /dev/kmsg as the
// console (the kubelet's OOM watcher reads it; the machine's kernel log is
// not the node's to read).
func mountDev(root string) error {
	dev := filepath.Join(root, "dev")
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID, "mode=755,size=4m"); err != nil {
		return err
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		dst := filepath.Join(dev, d)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("/dev/%s: %w", d, err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620,gid=5"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=256m"); err != nil {
		return err
	}
	for link, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "kmsg": "console",
	} {
		if err := os.Symlink(target, filepath.Join(dev, link)); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dev, "console"), nil, 0o600)
}

// pivot makes root the node's / and lets go of the machine's.
func pivot(root string) error {
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return err
	}
	return os.Chdir("/")
}

// startConsole gives the node a console as a terminal: a pty whose other
// end cat copies into the console log the lab handed PID 1 as its output.
// systemd writes its status and its own failures there.
func startConsole() error {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return err
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		return err
	}
	slave := fmt.Sprintf("/dev/pts/%d", n)
	if err := unix.Mount(slave, "/dev/console", "", unix.MS_BIND, ""); err != nil {
		return err
	}
	// cat holds the console open too: a pty's master reads EIO, and cat
	// would end, while no process has the other end open, and then every
	// write to the console stalls systemd (a second per status line).
	hold, err := os.OpenFile(slave, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer hold.Close()
	cat := &exec.Cmd{Path: "/bin/cat", Args: []string{"cat"}, Stdin: master, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: []*os.File{hold}}
	if err := cat.Start(); err != nil {
		return err
	}
	// PID 1 is about to become systemd, which reaps cat should it end.
	return cat.Process.Release()
}

// HasSystemd reports whether any node is real.
func (s *State) HasSystemd() bool {
	return slices.ContainsFunc(s.Nodes, func(n *NodeState) bool { return n.System == SystemSystemd })
}

// checkSystemd refuses what real nodes cannot do yet, and names that
// nobody has.
func (l *Lab) checkSystemd(s *State) error {
	for _, name := range l.Systemd {
		if name == "*" {
			continue
		}
		if _, err := s.Node(name); err != nil {
			return fmt.Errorf("real nodes: %w", err)
		}
	}
	if _, err := exec.LookPath("dnsmasq"); s.HasSystemd() && err != nil {
		return fmt.Errorf("real nodes take their first address from the lab's DHCP server, dnsmasq (apt-get install dnsmasq-base; infra/tools/setup.sh installs it): %w", err)
	}
	if s.HasSystemd() && s.Packages && slices.ContainsFunc(s.Nodes, func(n *NodeState) bool { return n.System != SystemSystemd }) {
		// The lab's kubelet package carries the real kubelet or the
		// stand-in, not both.
		return errors.New("a lab whose nodes take the lab's Kubernetes packages (cluster.packages.manage: true) is real or stand-in throughout: make every node real, or every node a stand-in (homelab-lab up --stand-in)")
	}
	return nil
}

// inotifyInstances is the file holding the machine's limit of inotify
// instances per user. Every node's systemd, journald, logind, containerd,
// kubelet and kube-proxy watch files, all as root of the machine's one
// user namespace: Debian's default of 128 is spent by seven real nodes,
// and the next watcher fails "too many open files" (kube-proxy exited so
// at start on the last node up). kind's known issues give the same fix.
const inotifyInstances = "/proc/sys/fs/inotify/max_user_instances"

// inotifyPerNode is what one real node may use, with room to spare
// (about 18 were in use per idle node).
const inotifyPerNode = 64

// realNodes counts the nodes that boot real systemd.
func (s *State) realNodes() int {
	n := 0
	for _, node := range s.Nodes {
		if node.System == SystemSystemd {
			n++
		}
	}
	return n
}

// realNodesElsewhere counts the real nodes of the other labs up on this
// machine (found through the owners of the lab namespaces): they share
// the root user's inotify limit.
func realNodesElsewhere(self string) int {
	entries, _ := os.ReadDir(ownersDir)
	seen := map[string]bool{filepath.Clean(self): true}
	n := 0
	for _, e := range entries {
		data, err := os.ReadFile(ownerPath(e.Name()))
		if err != nil {
			continue
		}
		dir := filepath.Clean(strings.TrimSpace(string(data)))
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if st, err := (&Lab{Dir: dir}).LoadState(); err == nil {
			n += st.realNodes()
		}
	}
	return n
}

// ensureInotify raises the machine's limit to what n real nodes (of every
// lab up) need on top of the machine's own use, never lowers it, and says so when it
// changes it (a machine setting, harmless, reset at the next boot).
func (l *Lab) ensureInotify(n int) error {
	data, err := os.ReadFile(inotifyInstances)
	if err != nil {
		return err
	}
	have, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: %w", inotifyInstances, err)
	}
	want := 128 + inotifyPerNode*n
	if have >= want {
		return nil
	}
	if err := os.WriteFile(inotifyInstances, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("raising fs.inotify.max_user_instances from %d to %d for %d real nodes: %w", have, want, n, err)
	}
	l.logf("lab: raised this machine's fs.inotify.max_user_instances from %d to %d: %d real nodes watch files as its root user", have, want, n)
	return nil
}
