package nodefacts

import "strings"

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
// set up. Both read this one list (nodefacts/state.sh, nodefacts/presence.sh
// with HasLeftovers), so they cannot disagree about a node.
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

// HasLeftovers is nodefacts/state.sh's leftover test (infra/scripts) in
// Go, over what nodefacts/presence.sh found.
func HasLeftovers(present map[string]bool) bool {
	for _, l := range Leftovers {
		if present[l.Path] {
			return true
		}
	}
	return false
}

// What infra/scripts/nodefacts/state.sh prints: StateSetUp when one of
// its markers and all its files are there, StatePartial when kubeadm left
// something behind (an interrupted run: Leftovers), StateNone otherwise.
const (
	StateSetUp   = "yes"
	StatePartial = "partial"
	StateNone    = "no"
)

// ParsePresence reads what infra/scripts/nodefacts/presence.sh prints:
// the paths found. Other lines (a login banner) are ignored.
func ParsePresence(out string) map[string]bool {
	present := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "present="); ok && p != "" {
			present[p] = true
		}
	}
	return present
}
