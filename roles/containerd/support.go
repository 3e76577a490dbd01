package containerd

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// Support is how a containerd release stands with a Kubernetes minor.
type Support int

const (
	// Tested: containerd recommends it for that minor.
	Tested Support = iota
	// Untested: it works as far as anyone here knows, but containerd's
	// matrix does not list it (Debian 12's 1.6.20 under v1.35).
	Untested
	// Unsupported: the kubelet cannot run on it.
	Unsupported
	// Unknown: the matrix has no row for the minor yet.
	Unknown
)

// tested is containerd's "Kubernetes Support" matrix (RELEASES.md): per
// Kubernetes minor, the oldest release of each containerd line it
// recommends. containerd revises it as it tests; a newer line than a
// row's newest is taken as tested too (containerd writes "2.2.0+").
var tested = map[string][]string{
	"1.30": {"2.1.0", "2.0.0", "1.7.13", "1.6.28"},
	"1.31": {"2.1.0", "2.0.0", "1.7.20", "1.6.34"},
	"1.32": {"2.1.0", "2.0.1", "1.7.24", "1.6.36"},
	"1.33": {"2.1.0", "2.0.4", "1.7.24", "1.6.36"},
	"1.34": {"2.1.3", "2.0.6", "1.7.28", "1.6.39"},
	"1.35": {"2.2.0", "2.1.5", "1.7.28"},
	"1.36": {"2.3.0", "2.2.0"},
}

var (
	// criV1 is the oldest containerd whose CRI v1 the kubelet of v1.26
	// and later (which dropped v1alpha2) runs on, as containerd states it
	// ("v1.6.15+, v1.7.0+ | 1.26+").
	criV1 = version.MustParseGeneric("1.6.15")
	// lastOn1x: Kubernetes v1.35 is the last minor that supports
	// containerd 1.x; from v1.36 the kubelet needs the CRI's
	// RuntimeConfig (its cgroup driver from the runtime, KEP-4033),
	// which only 2.x answers.
	lastOn1x = version.MajorMinor(1, 35)
)

// Verdict is Supports' answer: the level and, for all but Tested, why.
type Verdict struct {
	Support Support
	Reason  string
}

// Supports says how containerd release containerdVersion (as `containerd
// --version` prints it: 1.6.20~ds1, v2.1.4) stands with the kubelet of
// kubernetesVersion (v1.35.4).
func Supports(containerdVersion, kubernetesVersion string) (Verdict, error) {
	cv, err := version.ParseGeneric(strings.TrimPrefix(containerdVersion, "v"))
	if err != nil {
		return Verdict{}, fmt.Errorf("containerd version %q: %w", containerdVersion, err)
	}
	kv, err := version.ParseGeneric(kubernetesVersion)
	if err != nil {
		return Verdict{}, fmt.Errorf("Kubernetes version %q: %w", kubernetesVersion, err)
	}
	minor := fmt.Sprintf("%d.%d", kv.Major(), kv.Minor())
	release := fmt.Sprintf("%d.%d.%d", cv.Major(), cv.Minor(), cv.Patch())
	switch {
	case cv.LessThan(criV1):
		return Verdict{Unsupported, fmt.Sprintf("containerd %s predates the CRI v1 every supported kubelet speaks (containerd 1.6.15 or later)", release)}, nil
	case cv.Major() < 2 && version.MajorMinor(kv.Major(), kv.Minor()).GreaterThan(lastOn1x):
		return Verdict{Unsupported, fmt.Sprintf("Kubernetes v1.35 is the last minor to run on containerd 1.x, and this is v%s on containerd %s: install containerd 2.x first", minor, release)}, nil
	}
	row, ok := tested[minor]
	if !ok {
		return Verdict{Unknown, fmt.Sprintf("containerd's Kubernetes support matrix known here has no row for v%s", minor)}, nil
	}
	line := version.MajorMinor(cv.Major(), cv.Minor())
	for i, oldest := range row {
		o := version.MustParseGeneric(oldest)
		oLine := version.MajorMinor(o.Major(), o.Minor())
		if (line.EqualTo(oLine) && !cv.LessThan(o)) || (i == 0 && line.GreaterThan(oLine)) {
			return Verdict{Support: Tested}, nil
		}
	}
	return Verdict{Untested, fmt.Sprintf("containerd tests Kubernetes v%s with %s or later, not %s", minor, strings.Join(row, ", "), release)}, nil
}
