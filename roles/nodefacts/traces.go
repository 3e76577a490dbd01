package nodefacts

import (
	"strings"

	"github.com/homelab-dev/homelab/roles/shell"
)

// Kind is how a Trace is looked for.
type Kind int

const (
	// File is a regular file.
	File Kind = iota
	// Dir is a directory.
	Dir
	// AnyMatch is a glob: any match counts.
	AnyMatch
)

// Trace is a path whose presence on a node tells something.
type Trace struct {
	Path string
	Kind Kind
}

// AnyManifest stands for "some static pod manifest exists".
const AnyManifest = ManifestsDir + "/*.yaml"

// Leftovers are what kubeadm leaves on a node from the first moments of
// an init or join: any of them means a run began there. The provider
// resets such a node unless it is marked complete; adopt calls it partly
// set up. Both read this one list (LeftoverTest, PresenceScript with
// HasLeftovers), so they cannot disagree about a node.
var Leftovers = []Trace{
	{Path: AnyManifest, Kind: AnyMatch},
	{Path: KubeletConf, Kind: File},
	{Path: AdminConf, Kind: File},
	{Path: EtcdMemberDir, Kind: Dir},
}

// Files are Traces of regular files.
func Files(paths ...string) []Trace {
	out := make([]Trace, len(paths))
	for i, p := range paths {
		out[i] = Trace{Path: p, Kind: File}
	}
	return out
}

// Test is a shell condition, true when the trace is on the node.
func (t Trace) Test() string { return t.test("") }

// test looks below root (a test's file tree); root "" is the node's /.
// The paths are this package's constants: only root needs quoting, and a
// glob must stay unquoted.
func (t Trace) test(root string) string {
	p := rootWord(root) + t.Path
	switch t.Kind {
	case Dir:
		return "test -d " + p
	case AnyMatch:
		return "ls " + p + " >/dev/null 2>&1"
	}
	return "test -f " + p
}

// LeftoverTest is a shell condition, true when kubeadm left something on
// the node (any of Leftovers).
func LeftoverTest() string { return leftoverTest("") }

func leftoverTest(root string) string {
	tests := make([]string, len(Leftovers))
	for i, l := range Leftovers {
		tests[i] = l.test(root)
	}
	return strings.Join(tests, " || ")
}

// HasLeftovers is LeftoverTest in Go, over PresenceScript's findings.
func HasLeftovers(present map[string]bool) bool {
	for _, l := range Leftovers {
		if present[l.Path] {
			return true
		}
	}
	return false
}

// What StateScript prints.
const (
	StateSetUp   = "yes"
	StatePartial = "partial"
	StateNone    = "no"
)

// StateScript prints StateSetUp when one of markers (alternatives: the
// node that ran init is as much a member as one that joined) and all files
// are there, StatePartial when kubeadm left something behind (an
// interrupted run: LeftoverTest), StateNone otherwise. Read-only.
func StateScript(markers []string, files ...string) string {
	return stateScript("", markers, files)
}

func stateScript(root string, markers, files []string) string {
	alt := make([]string, len(markers))
	for i, m := range markers {
		alt[i] = Trace{Path: m}.test(root)
	}
	test := "{ " + strings.Join(alt, " || ") + "; }"
	for _, f := range files {
		test += " && " + Trace{Path: f}.test(root)
	}
	return "if " + test + "; then echo " + StateSetUp + "; " +
		"elif " + leftoverTest(root) + "; then echo " + StatePartial + "; else echo " + StateNone + "; fi"
}

// PresenceScript prints "present=PATH" for each trace on the node, and
// for each of Leftovers, so HasLeftovers can be asked of what it found.
// Read-only.
func PresenceScript(traces ...Trace) string { return presenceScript("", traces) }

func presenceScript(root string, traces []Trace) string {
	var b strings.Builder
	seen := map[Trace]bool{}
	for _, t := range append(append([]Trace{}, traces...), Leftovers...) {
		if seen[t] {
			continue
		}
		seen[t] = true
		b.WriteString(t.test(root) + " && echo " + shell.Quote("present="+t.Path) + "\n")
	}
	b.WriteString("true")
	return b.String()
}

// ParsePresence reads PresenceScript's output: the paths found. Other
// lines (a login banner) are ignored.
func ParsePresence(out string) map[string]bool {
	present := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "present="); ok && p != "" {
			present[p] = true
		}
	}
	return present
}

// rootWord is root as a word of a script, nothing for the node's own /:
// the scripts a node runs then read as written, paths unprefixed.
func rootWord(root string) string {
	if root == "" {
		return ""
	}
	return shell.Quote(root)
}
