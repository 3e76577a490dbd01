// Package unitfile reads systemd service units the way systemd does, as far
// as an emulated node needs: the unit search path, drop-ins, aliases, masks,
// command lines, environment files and the [Install] symlinks behind
// enable/disable. It has no daemon state, so systemctl can use it alone.
package unitfile

import (
	"os"
	"path/filepath"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// RootEnv relocates every path below (units, logs, /run) under a directory,
// so tests and tools can work on a tree that is not the running system's.
const RootEnv = envvars.InitRoot

// Paths locates the files of one node. Root "" (or "/") means the real root.
type Paths struct {
	Root string
}

// DefaultPaths honours RootEnv.
func DefaultPaths() Paths { return Paths{Root: os.Getenv(RootEnv)} }

// Path maps an absolute path on the node to where it lives under Root.
func (p Paths) Path(abs string) string {
	if p.Root == "" || p.Root == "/" {
		return abs
	}
	return filepath.Join(p.Root, abs)
}

// UnitDirs is systemd's system unit search path as seen on the node, highest
// precedence first. On merged-/usr systems the last two are one directory;
// entries are de-duplicated by file name, so reading it twice is harmless.
var UnitDirs = []string{
	ConfigDir,
	RuntimeConfigDir,
	"/usr/lib/systemd/system",
	"/lib/systemd/system",
}

// ConfigDir is where enable, disable and mask write their symlinks.
const ConfigDir = "/etc/systemd/system"

// RuntimeConfigDir holds runtime (non-persistent) enablement.
const RuntimeConfigDir = "/run/systemd/system"

// RunDir is the node's /run (RuntimeDirectory=, the control socket).
func (p Paths) RunDir() string { return p.Path("/run") }

// LogDir receives one UNIT.log per unit.
func (p Paths) LogDir() string { return p.Path("/var/log/homelab") }

// LogFile is the file a unit's stdout and stderr are appended to.
func (p Paths) LogFile(unit string) string {
	return filepath.Join(p.LogDir(), Short(unit)+".log")
}
