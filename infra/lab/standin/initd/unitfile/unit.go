package unitfile

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	sdunit "github.com/coreos/go-systemd/v22/unit"
	"golang.org/x/sys/unix"
)

// ErrNotFound means no unit file of that name (or alias) exists.
var ErrNotFound = errors.New("unit not found")

// Command is one Exec*= line, words split but not yet expanded: $VAR
// expansion needs the environment at start time.
type Command struct {
	Raw           string
	Words         []string
	IgnoreFailure bool // "-" prefix
	ArgvZero      bool // "@": the second word is argv[0]
}

// EnvFile is one EnvironmentFile= entry.
type EnvFile struct {
	Path     string
	Optional bool // "-" prefix
}

// Condition is a Condition*= or Assert*= setting, e.g. PathExists, "!/x".
type Condition struct {
	Kind  string
	Value string
}

// Unit is the merged result of a fragment and its drop-ins. Paths in it are
// as seen on the node (not prefixed by Paths.Root).
type Unit struct {
	Name         string   // canonical, e.g. "ssh.service"
	Names        []string // canonical name first, then aliases
	FragmentPath string
	DropIns      []string
	Masked       bool
	Warnings     []string

	Description   string
	Documentation []string
	Conditions    []Condition

	Type                 string
	ExecStartPre         []Command
	ExecStart            []Command
	ExecStartPost        []Command
	ExecReload           []Command
	ExecStop             []Command
	ExecStopPost         []Command
	Environment          []string
	EnvironmentFiles     []EnvFile
	WorkingDirectory     string
	WorkingDirOptional   bool
	Restart              string
	RestartSec           time.Duration
	TimeoutStartSec      time.Duration // 0: the supervisor's default
	TimeoutStopSec       time.Duration // 0: the supervisor's default
	KillMode             string
	KillSignal           syscall.Signal
	RemainAfterExit      bool
	RuntimeDirectory     []string
	RuntimeDirectoryMode os.FileMode

	WantedBy   []string
	RequiredBy []string
	Alias      []string

	// Timer is a .timer unit's [Timer] section (nil for other units).
	Timer *Timer
}

// HasInstall reports whether the unit can be enabled at all (systemd calls
// units without an [Install] section "static").
func (u *Unit) HasInstall() bool {
	return len(u.WantedBy)+len(u.RequiredBy)+len(u.Alias) > 0
}

var unitSuffixes = []string{".service", ".socket", ".target", ".timer", ".mount",
	".path", ".slice", ".scope", ".device", ".swap", ".automount"}

// Normalize turns "kubelet" into "kubelet.service", as systemctl does.
func Normalize(name string) string {
	for _, s := range unitSuffixes {
		if strings.HasSuffix(name, s) {
			return name
		}
	}
	return name + ".service"
}

// Short drops the ".service" suffix (used for log file names).
func Short(name string) string { return strings.TrimSuffix(name, ".service") }

// Load finds and merges the unit called name (with or without .service,
// canonical name or alias) from the search path under p.
func Load(p Paths, name string) (*Unit, error) {
	name = Normalize(name)
	frag, canonical, masked, err := findFragment(p, name)
	if errors.Is(err, ErrNotFound) {
		if target := findByAlias(p, name); target != "" {
			frag, canonical, masked, err = findFragment(p, target)
		}
	}
	if err != nil {
		return nil, err
	}
	u := &Unit{
		Name:                 canonical,
		Names:                []string{canonical},
		Type:                 "simple",
		Restart:              "no",
		RestartSec:           100 * time.Millisecond,
		KillMode:             "control-group",
		KillSignal:           unix.SIGTERM,
		RuntimeDirectoryMode: 0o755,
	}
	if name != canonical {
		u.Names = append(u.Names, name)
	}
	if masked {
		u.Masked = true
		u.FragmentPath = "/dev/null"
		return u, nil
	}
	u.FragmentPath = frag
	u.DropIns = dropIns(p, u.Names)
	if u.IsTimer() {
		u.Timer = &Timer{Accuracy: time.Minute}
	}
	for _, f := range append([]string{frag}, u.DropIns...) {
		if err := u.applyFile(p, f); err != nil {
			return nil, err
		}
	}
	for _, a := range u.Alias {
		if a = Normalize(a); !contains(u.Names, a) {
			u.Names = append(u.Names, a)
		}
	}
	if u.Timer != nil {
		if !u.Timer.hasTrigger() {
			// systemd's words: such a timer does not load.
			return nil, fmt.Errorf("%s: Timer unit lacks value setting. Refusing", u.Name)
		}
		if u.Timer.Unit == "" {
			u.Timer.Unit = strings.TrimSuffix(u.Name, ".timer") + ".service"
		}
	}
	return u, nil
}

// findFragment returns the node path of the unit file for name, following
// symlinks: one that points at a differently named file is an alias (as
// systemctl enable creates for Alias=), one to /dev/null is a mask.
func findFragment(p Paths, name string) (frag, canonical string, masked bool, err error) {
	for _, dir := range UnitDirs {
		cur := path.Join(dir, name)
		if _, err := os.Lstat(p.Path(cur)); err != nil {
			continue
		}
		for hops := 0; ; hops++ {
			fi, err := os.Lstat(p.Path(cur))
			if err != nil {
				return "", "", false, fmt.Errorf("%s: %w", cur, err)
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				return cur, path.Base(cur), false, nil
			}
			if hops > 8 {
				return "", "", false, fmt.Errorf("%s: too many symlinks", cur)
			}
			target, err := os.Readlink(p.Path(cur))
			if err != nil {
				return "", "", false, err
			}
			if target == "/dev/null" {
				return "", name, true, nil
			}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(cur), target)
			}
			cur = target
		}
	}
	return "", "", false, fmt.Errorf("%s: %w", name, ErrNotFound)
}

// findByAlias scans the unit directories for a unit declaring Alias=name,
// so "sshd" finds ssh.service even before ssh is enabled.
func findByAlias(p Paths, name string) string {
	seen := map[string]bool{}
	for _, dir := range UnitDirs {
		entries, _ := os.ReadDir(p.Path(dir))
		for _, e := range entries {
			n := e.Name()
			if seen[n] || !strings.HasSuffix(n, ".service") || e.IsDir() {
				continue
			}
			seen[n] = true
			data, err := os.ReadFile(p.Path(path.Join(dir, n)))
			if err != nil || !strings.Contains(string(data), name) {
				continue
			}
			secs, err := sdunit.DeserializeSections(strings.NewReader(string(data)))
			if err != nil {
				continue
			}
			for _, s := range secs {
				for _, e := range s.Entries {
					if s.Section != "Install" || e.Name != "Alias" {
						continue
					}
					for _, a := range strings.Fields(e.Value) {
						if Normalize(a) == name {
							return n
						}
					}
				}
			}
		}
	}
	return ""
}

// dropIns lists NAME.d/*.conf over the search path; a file name in a
// higher-precedence directory hides the same name further down, and the
// result is applied in file-name order, as systemd does.
func dropIns(p Paths, names []string) []string {
	byBase := map[string]string{}
	for _, dir := range UnitDirs {
		for _, n := range names {
			d := path.Join(dir, n+".d")
			entries, _ := os.ReadDir(p.Path(d))
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".conf") {
					continue
				}
				if _, ok := byBase[e.Name()]; !ok {
					byBase[e.Name()] = path.Join(d, e.Name())
				}
			}
		}
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = byBase[b]
	}
	return out
}

func (u *Unit) applyFile(p Paths, file string) error {
	f, err := os.Open(p.Path(file))
	if err != nil {
		return err
	}
	defer f.Close()
	secs, err := sdunit.DeserializeSections(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, s := range secs {
		for _, e := range s.Entries {
			// The parser keeps continuation backslashes; systemd joins
			// continued lines with a space.
			v := strings.TrimSpace(strings.ReplaceAll(e.Value, "\\\n", " "))
			if err := u.apply(s.Section, e.Name, v); err != nil {
				u.Warnings = append(u.Warnings, fmt.Sprintf("%s: [%s] %s=%s: %v", file, s.Section, e.Name, v, err))
			}
		}
	}
	return nil
}

// apply merges one setting; list settings append and an empty value resets
// them, scalars are overwritten. Unknown keys are ignored.
func (u *Unit) apply(section, key, v string) error {
	switch section {
	case "Unit":
		switch {
		case key == "Description":
			u.Description = v
		case key == "Documentation":
			return appendWords(&u.Documentation, v)
		case strings.HasPrefix(key, "Condition"), strings.HasPrefix(key, "Assert"):
			if v == "" {
				u.Conditions = nil
				return nil
			}
			kind := strings.TrimPrefix(strings.TrimPrefix(key, "Condition"), "Assert")
			u.Conditions = append(u.Conditions, Condition{Kind: kind, Value: v})
		}
	case "Service":
		v = expandSpecifiers(v, u.Name)
		switch key {
		case "Type":
			u.Type = v
		case "ExecStartPre":
			return appendCommand(&u.ExecStartPre, v)
		case "ExecStart":
			return appendCommand(&u.ExecStart, v)
		case "ExecStartPost":
			return appendCommand(&u.ExecStartPost, v)
		case "ExecReload":
			return appendCommand(&u.ExecReload, v)
		case "ExecStop":
			return appendCommand(&u.ExecStop, v)
		case "ExecStopPost":
			return appendCommand(&u.ExecStopPost, v)
		case "Environment":
			if v == "" {
				u.Environment = nil
				return nil
			}
			words, err := SplitWords(v)
			if err != nil {
				return err
			}
			for _, w := range words {
				k, _, ok := strings.Cut(w, "=")
				if !ok || !envName.MatchString(k) {
					return fmt.Errorf("invalid assignment %q", w)
				}
				u.Environment = append(u.Environment, w)
			}
		case "EnvironmentFile":
			if v == "" {
				u.EnvironmentFiles = nil
				return nil
			}
			ef := EnvFile{Path: v}
			if strings.HasPrefix(v, "-") {
				ef = EnvFile{Path: v[1:], Optional: true}
			}
			u.EnvironmentFiles = append(u.EnvironmentFiles, ef)
		case "WorkingDirectory":
			u.WorkingDirOptional = strings.HasPrefix(v, "-")
			u.WorkingDirectory = strings.TrimPrefix(v, "-")
			if u.WorkingDirectory == "~" {
				u.WorkingDirectory = "/root"
			}
		case "Restart":
			u.Restart = v
		case "RestartSec":
			return setDuration(&u.RestartSec, v)
		case "TimeoutStopSec":
			return setDuration(&u.TimeoutStopSec, v)
		case "TimeoutStartSec":
			return setDuration(&u.TimeoutStartSec, v)
		case "TimeoutSec":
			if err := setDuration(&u.TimeoutStartSec, v); err != nil {
				return err
			}
			return setDuration(&u.TimeoutStopSec, v)
		case "KillMode":
			u.KillMode = v
		case "KillSignal":
			sig, err := ParseSignal(v)
			if err != nil {
				return err
			}
			u.KillSignal = sig
		case "RemainAfterExit":
			b, err := ParseBool(v)
			u.RemainAfterExit = b
			return err
		case "RuntimeDirectory":
			return appendWords(&u.RuntimeDirectory, v)
		case "RuntimeDirectoryMode":
			var m uint32
			if _, err := fmt.Sscanf(v, "%o", &m); err != nil {
				return err
			}
			u.RuntimeDirectoryMode = os.FileMode(m)
		}
	case "Timer":
		if u.Timer != nil {
			return u.applyTimer(key, v)
		}
	case "Install":
		switch key {
		case "WantedBy":
			return appendWords(&u.WantedBy, v)
		case "RequiredBy":
			return appendWords(&u.RequiredBy, v)
		case "Alias":
			return appendWords(&u.Alias, v)
		}
	}
	return nil
}

func appendWords(dst *[]string, v string) error {
	if v == "" {
		*dst = nil
		return nil
	}
	words, err := SplitWords(v)
	*dst = append(*dst, words...)
	return err
}

func appendCommand(dst *[]Command, v string) error {
	if v == "" {
		*dst = nil // "ExecStart=" resets, as kubeadm's drop-in relies on
		return nil
	}
	c, err := ParseCommand(v)
	if err != nil {
		return err
	}
	*dst = append(*dst, c)
	return nil
}

// ParseCommand splits an Exec*= value and strips systemd's executable
// prefixes ("-", "@", "+", "!", "!!", ":"); only "-" and "@" change what
// the supervisor does.
func ParseCommand(v string) (Command, error) {
	words, err := SplitWords(v)
	if err != nil {
		return Command{}, err
	}
	if len(words) == 0 {
		return Command{}, fmt.Errorf("empty command")
	}
	c := Command{Raw: v}
	first := words[0]
	for len(first) > 0 && strings.ContainsRune("-@+!:", rune(first[0])) {
		switch first[0] {
		case '-':
			c.IgnoreFailure = true
		case '@':
			c.ArgvZero = true
		}
		first = first[1:]
	}
	words[0] = first
	if first == "" {
		words = words[1:]
	}
	if len(words) == 0 || (c.ArgvZero && len(words) < 2) {
		return Command{}, fmt.Errorf("no executable in %q", v)
	}
	c.Words = words
	return c, nil
}

// ParseBool accepts systemd's boolean spellings.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "yes", "y", "true", "t", "on":
		return true, nil
	case "0", "no", "n", "false", "f", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", v)
}

// ParseSignal accepts "SIGTERM", "TERM" or a number.
func ParseSignal(v string) (syscall.Signal, error) {
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err == nil && fmt.Sprint(n) == v {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if s := unix.SignalNum(name); s != 0 {
		return s, nil
	}
	return 0, fmt.Errorf("unknown signal %q", v)
}

func setDuration(dst *time.Duration, v string) error {
	d, err := ParseDuration(v)
	if err == nil {
		*dst = d
	}
	return err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
