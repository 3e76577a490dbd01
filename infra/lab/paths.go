package lab

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/ciliumchart"
)

const (
	// DefaultDir holds the lab's disks, keys and state. It must not lie under
	// a directory the nodes overlay: overlayfs refuses an upper directory
	// inside its own lower layer, and a node would see the others' disks.
	DefaultDir = "/srv/homelab-lab"
	// EnvDir overrides DefaultDir.
	EnvDir = envvars.LabDir

	// defaultPrefix begins the default lab's machine-wide names (Names).
	defaultPrefix = "hl-"
	bridgeName    = "br0"
	// marker proves a directory is a lab's before down removes it.
	marker = ".homelab-lab"
)

// overlaid are the node directories each node gets its own copy of.
var overlaid = []string{"etc", "var", "opt", "usr", "root"}

// forbiddenParents are where the lab directory must not live: the overlaid
// directories and those that are per-node or virtual in a node.
var forbiddenParents = []string{"/etc", "/var", "/opt", "/usr", "/root", "/run", "/tmp", "/proc", "/sys", "/dev", "/bin", "/sbin", "/lib", "/lib64", "/boot"}

// Lab is one emulated homelab on this machine, identified by its directory.
type Lab struct {
	Dir string
	// Log receives progress (building binaries, booting nodes).
	Log io.Writer
	// Systemd names the nodes up makes real (SystemSystemd): systemd,
	// containerd, runc and the kubelet for real; "*" for every node. The
	// others run the stand-ins.
	Systemd []string
	// names replaces NamesFor(Dir): a test's way to make two labs' names
	// collide, as two directories' hashes could.
	names *Names
}

// Open returns the lab in dir, or in $HOMELAB_LAB_DIR, or in DefaultDir.
func Open(dir string) (*Lab, error) {
	if dir == "" {
		dir = os.Getenv(EnvDir)
	}
	if dir == "" {
		dir = DefaultDir
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	return &Lab{Dir: filepath.Clean(dir), Log: os.Stderr}, nil
}

func checkDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("lab directory %q must be an absolute path", dir)
	}
	clean := filepath.Clean(dir)
	// A symlinked parent could still put the disks under /var.
	if real, err := filepath.EvalSymlinks(filepath.Dir(clean)); err == nil {
		clean = filepath.Join(real, filepath.Base(clean))
	}
	if clean == "/" {
		return fmt.Errorf("lab directory cannot be /")
	}
	for _, p := range forbiddenParents {
		if clean == p || strings.HasPrefix(clean, p+"/") {
			return fmt.Errorf("lab directory %s lies under %s, which every node overlays or hides; use a directory such as %s ($%s)", dir, p, DefaultDir, EnvDir)
		}
	}
	return nil
}

func (l *Lab) logf(format string, args ...any) {
	if l.Log != nil {
		fmt.Fprintf(l.Log, format+"\n", args...)
	}
}

func (l *Lab) statePath() string      { return filepath.Join(l.Dir, "state.json") }
func (l *Lab) lockPath() string       { return filepath.Join(l.Dir, "lock") }
func (l *Lab) markerPath() string     { return filepath.Join(l.Dir, marker) }
func (l *Lab) sshDir() string         { return filepath.Join(l.Dir, "ssh") }
func (l *Lab) KeyPath() string        { return filepath.Join(l.sshDir(), "id_ed25519") }
func (l *Lab) KnownHostsPath() string { return filepath.Join(l.sshDir(), "known_hosts") }

// LabKnownHostsPath is the lab's own record of the nodes' current host
// keys, for `homelab-lab ssh`; KnownHostsPath is the provisioner's, which
// keeps a replaced machine's old key as a real one would.
func (l *Lab) LabKnownHostsPath() string { return l.labKnownHostsPath() }
func (l *Lab) labKnownHostsPath() string { return filepath.Join(l.sshDir(), "lab_known_hosts") }
func (l *Lab) toolsDir() string          { return filepath.Join(l.Dir, "tools") }
func (l *Lab) systemdToolsDir() string   { return filepath.Join(l.Dir, "tools-systemd") }

// ChartPath is the lab's stand-in for Cilium's chart archive
// (inventory/lab.yaml's cluster.cilium.chart).
func (l *Lab) ChartPath() string { return filepath.Join(l.Dir, "charts", ciliumchart.FileName) }
func (l *Lab) baseDir() string   { return filepath.Join(l.Dir, "base") }
func (l *Lab) nodeDir(name string) string {
	return filepath.Join(l.Dir, "nodes", name)
}
func (l *Lab) diskDir(name string) string { return filepath.Join(l.nodeDir(name), "disk") }
func (l *Lab) consolePath(name string) string {
	return filepath.Join(l.nodeDir(name), "console.log")
}
func (l *Lab) bootSpecPath(name string) string {
	return filepath.Join(l.nodeDir(name), "boot.json")
}

// upperDir is where a node's writes to /DIR land.
func (l *Lab) upperDir(name, dir string) string {
	return filepath.Join(l.diskDir(name), dir, "upper")
}

func (l *Lab) workDir(name, dir string) string {
	return filepath.Join(l.diskDir(name), dir, "work")
}

// Names are a lab's machine-wide names: its network namespaces and its
// real nodes' cgroups. Everything else a lab makes is inside its own
// directory or its own namespaces (two labs may even use the same subnet:
// each bridge is alone in its namespace), so labs whose names differ run
// side by side.
type Names struct {
	// Prefix begins every name: hl- for the default lab, hlXXXX- (a hash
	// of the directory) for any other.
	Prefix string
}

// NamesFor derives the names of the lab in dir. The default lab keeps the
// short names its users type (hl-gw, hl-cp-1).
func NamesFor(dir string) Names {
	dir = filepath.Clean(dir)
	if dir == DefaultDir {
		return Names{Prefix: defaultPrefix}
	}
	sum := sha256.Sum256([]byte(dir))
	return Names{Prefix: fmt.Sprintf("hl%x-", sum[:2])}
}

// Bridge is the namespace that holds the lab's bridge, alone.
func (n Names) Bridge() string { return n.Prefix + "br" }

// Gateway is the namespace of the lab's gateway address: the
// provisioner's seat.
func (n Names) Gateway() string { return n.Prefix + "gw" }

// GatewayPath is Gateway as a path, for ssh.NetnsEnv and netns.Dial.
func (n Names) GatewayPath() string { return filepath.Join(netnsDir, n.Gateway()) }

// Node is a node's network namespace, and its cgroup's name on a real
// node.
func (n Names) Node(node string) string { return n.Prefix + node }

// Names are this lab's machine-wide names.
func (l *Lab) Names() Names {
	if l.names != nil {
		return *l.names
	}
	return NamesFor(l.Dir)
}

// EnvE2E gates the tests that build a lab: they need root, make network
// namespaces and mounts, and the kube and etcd binaries (built on first use
// by infra/tools, about 15 minutes cold).
const EnvE2E = envvars.E2E
