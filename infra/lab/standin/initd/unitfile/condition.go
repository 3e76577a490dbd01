package unitfile

import (
	"os"
	"path/filepath"
	"strings"
)

// FailedCondition returns the first condition that keeps the unit from
// starting, or nil. Debian's ssh and keepalived units rely on
// ConditionPathExists and ConditionFileNotEmpty. Kinds this package does not
// know pass, as they would on most machines.
func (u *Unit) FailedCondition(p Paths) *Condition {
	var triggers []Condition
	triggered := false
	for _, c := range u.Conditions {
		v := c.Value
		trigger := strings.HasPrefix(v, "|")
		v = strings.TrimPrefix(v, "|")
		negate := strings.HasPrefix(v, "!")
		v = strings.TrimPrefix(v, "!")
		ok := check(p, c.Kind, v) != negate
		if trigger {
			triggers = append(triggers, c)
			triggered = triggered || ok
			continue
		}
		if !ok {
			c := c
			return &c
		}
	}
	if len(triggers) > 0 && !triggered {
		return &triggers[0]
	}
	return nil
}

func check(p Paths, kind, v string) bool {
	full := p.Path(v)
	switch kind {
	case "PathExists":
		_, err := os.Stat(full)
		return err == nil
	case "PathExistsGlob":
		m, _ := filepath.Glob(full)
		return len(m) > 0
	case "PathIsDirectory":
		fi, err := os.Stat(full)
		return err == nil && fi.IsDir()
	case "PathIsSymbolicLink":
		fi, err := os.Lstat(full)
		return err == nil && fi.Mode()&os.ModeSymlink != 0
	case "FileNotEmpty":
		fi, err := os.Stat(full)
		return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
	case "DirectoryNotEmpty":
		entries, err := os.ReadDir(full)
		return err == nil && len(entries) > 0
	case "FileIsExecutable":
		fi, err := os.Stat(full)
		return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	}
	return true
}
