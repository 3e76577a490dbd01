package unitfile

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// BootTarget is the only target an emulated node boots into.
const BootTarget = "multi-user.target"

// Change is one symlink created or removed, with node paths, for messages
// like systemctl's "Created symlink A → B.".
type Change struct {
	Created bool
	Path    string
	Target  string
}

func (c Change) String() string {
	if c.Created {
		return fmt.Sprintf("Created symlink %s → %s.", c.Path, c.Target)
	}
	return fmt.Sprintf("Removed %q.", c.Path)
}

// Enable links the unit into the .wants/ (and .requires/) directories its
// [Install] section names, plus its Alias= names. Like the brief for the lab
// says, a unit without [Install] is wanted by multi-user.target.
func Enable(p Paths, name string) ([]Change, error) {
	u, err := loadInstallable(p, name)
	if err != nil {
		return nil, err
	}
	wanted := u.WantedBy
	if !u.HasInstall() {
		wanted = []string{BootTarget}
	}
	var changes []Change
	add := func(link string) error {
		c, err := symlink(p, link, u.FragmentPath)
		if c != nil {
			changes = append(changes, *c)
		}
		return err
	}
	for _, t := range wanted {
		if err := add(path.Join(ConfigDir, t+".wants", u.Name)); err != nil {
			return changes, err
		}
	}
	for _, t := range u.RequiredBy {
		if err := add(path.Join(ConfigDir, t+".requires", u.Name)); err != nil {
			return changes, err
		}
	}
	for _, a := range u.Alias {
		if a = Normalize(a); a != u.Name {
			if err := add(path.Join(ConfigDir, a)); err != nil {
				return changes, err
			}
		}
	}
	return changes, nil
}

// Disable removes every .wants/.requires link to the unit and its Alias=
// links, in /etc and /run.
func Disable(p Paths, name string) ([]Change, error) {
	u, err := loadInstallable(p, name)
	if err != nil {
		return nil, err
	}
	var changes []Change
	for _, dir := range []string{ConfigDir, RuntimeConfigDir} {
		for _, n := range u.Names {
			for _, kind := range []string{"*.wants", "*.requires"} {
				matches, _ := filepath.Glob(filepath.Join(p.Path(dir), kind, n))
				sort.Strings(matches)
				for _, m := range matches {
					rel := path.Join(dir, path.Base(path.Dir(m)), n)
					if c := unlinkSymlink(m, rel); c != nil {
						changes = append(changes, *c)
					}
				}
			}
		}
	}
	for _, a := range u.Alias {
		if a = Normalize(a); a != u.Name {
			rel := path.Join(ConfigDir, a)
			if c := unlinkSymlink(p.Path(rel), rel); c != nil {
				changes = append(changes, *c)
			}
		}
	}
	return changes, nil
}

// IsEnabled returns systemd's unit file state: enabled, enabled-runtime,
// alias, static, disabled or masked.
func IsEnabled(p Paths, name string) (string, error) {
	u, err := Load(p, name)
	if err != nil {
		return "", err
	}
	switch {
	case u.Masked:
		return "masked", nil
	case Normalize(name) != u.Name:
		return "alias", nil
	case linked(p, ConfigDir, u.Names):
		return "enabled", nil
	case linked(p, RuntimeConfigDir, u.Names):
		return "enabled-runtime", nil
	case !u.HasInstall():
		return "static", nil
	}
	return "disabled", nil
}

// EnabledState reports whether is-enabled exits 0 for a state.
func EnabledState(state string) bool {
	switch state {
	case "enabled", "enabled-runtime", "alias", "static", "indirect", "generated", "linked", "linked-runtime":
		return true
	}
	return false
}

// Mask links the unit name to /dev/null in /etc so it cannot be started.
func Mask(p Paths, name string) ([]Change, error) {
	name = Normalize(name)
	link := path.Join(ConfigDir, name)
	if fi, err := os.Lstat(p.Path(link)); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return nil, fmt.Errorf("Failed to mask unit: File %s already exists.", link)
	}
	c, err := symlink(p, link, "/dev/null")
	if c == nil {
		return nil, err
	}
	return []Change{*c}, err
}

// Unmask removes a /dev/null link made by Mask.
func Unmask(p Paths, name string) ([]Change, error) {
	link := path.Join(ConfigDir, Normalize(name))
	if t, err := os.Readlink(p.Path(link)); err != nil || t != "/dev/null" {
		return nil, nil
	}
	if c := unlinkSymlink(p.Path(link), link); c != nil {
		return []Change{*c}, nil
	}
	return nil, nil
}

// TimersTarget is where timers are enabled (WantedBy=timers.target); a
// booting systemd reaches it on the way to multi-user.target.
const TimersTarget = "timers.target"

// BootUnits lists the services and timers wanted or required by
// multi-user.target, and the timers of timers.target, in name order: what
// init starts at boot.
func BootUnits(p Paths) []string {
	seen := map[string]bool{}
	var out []string
	for _, dir := range []string{ConfigDir, RuntimeConfigDir} {
		for _, target := range []string{BootTarget, TimersTarget} {
			for _, kind := range []string{".wants", ".requires"} {
				entries, _ := os.ReadDir(p.Path(path.Join(dir, target+kind)))
				for _, e := range entries {
					n := e.Name()
					if seen[n] || !(strings.HasSuffix(n, ".timer") || target == BootTarget && strings.HasSuffix(n, ".service")) {
						continue
					}
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func loadInstallable(p Paths, name string) (*Unit, error) {
	u, err := Load(p, name)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("Unit file %s does not exist.", Normalize(name))
	}
	if err != nil {
		return nil, err
	}
	if u.Masked {
		return nil, fmt.Errorf("Unit file %s is masked.", u.Name)
	}
	return u, nil
}

func linked(p Paths, dir string, names []string) bool {
	for _, n := range names {
		for _, kind := range []string{"*.wants", "*.requires"} {
			if m, _ := filepath.Glob(filepath.Join(p.Path(dir), kind, n)); len(m) > 0 {
				return true
			}
		}
	}
	return false
}

// symlink makes link (a node path) point at target (a node path, as systemd
// writes it even under --root), replacing a different existing link.
func symlink(p Paths, link, target string) (*Change, error) {
	full := p.Path(link)
	if cur, err := os.Readlink(full); err == nil {
		if cur == target {
			return nil, nil
		}
		if err := os.Remove(full); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(target, full); err != nil {
		return nil, err
	}
	return &Change{Created: true, Path: link, Target: target}, nil
}

func unlinkSymlink(full, shown string) *Change {
	fi, err := os.Lstat(full)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	if os.Remove(full) != nil {
		return nil
	}
	return &Change{Path: shown}
}
