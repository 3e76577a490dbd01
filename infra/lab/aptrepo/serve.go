package aptrepo

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/inventory"
)

// PathPrefix and PathSuffix frame a minor's repository on pkgs.k8s.io
// (/core:/stable:/v1.34/deb/); the lab serves the same paths.
var PathPrefix, PathSuffix, _ = strings.Cut(inventory.PackagesPath, inventory.MinorPlaceholder)

// Repository is the URL template the inventory's cluster.packages.repository
// takes for a repository served at host (the lab's gateway address).
func Repository(host string) string {
	return "http://" + host + inventory.PackagesPath
}

// repoPath is a file of a minor's repository, at most one directory deep
// (ARCH/NAME.deb); no segment starts with a dot.
var repoPath = regexp.MustCompile(`^` + regexp.QuoteMeta(PathPrefix) + `(v[0-9]+\.[0-9]+)` + regexp.QuoteMeta(PathSuffix) +
	`([A-Za-z0-9_+~-][A-Za-z0-9._+~-]*(/[A-Za-z0-9_+~-][A-Za-z0-9._+~:-]*)?)$`)

// DistributionPath is where the lab serves its real nodes' distribution
// repository (WriteDistribution), from root's DistributionDir.
const (
	DistributionPath = "/debian/"
	DistributionDir  = "debian"
)

// distributionPath is a file of the distribution repository, framed as
// repoPath frames a minor's.
var distributionPath = regexp.MustCompile(`^` + regexp.QuoteMeta(DistributionPath) +
	`([A-Za-z0-9_+~-][A-Za-z0-9._+~-]*(/[A-Za-z0-9_+~-][A-Za-z0-9._+~:-]*)?)$`)

// DockerPath is where the lab serves its stand-in for Docker's
// repository (WriteSuite), from root's DockerDir: Docker's layout is
// deeper than a flat repository's (dists/SUITE/COMPONENT/binary-ARCH/).
const (
	DockerPath = "/docker/linux/debian/"
	DockerDir  = "docker"
)

// dockerPath is a file of that repository, a few directories deep; no
// segment starts with a dot.
var dockerPath = regexp.MustCompile(`^` + regexp.QuoteMeta(DockerPath) +
	`((?:[A-Za-z0-9_+~-][A-Za-z0-9._+~:-]*/){0,5}[A-Za-z0-9_+~-][A-Za-z0-9._+~:-]*)$`)

// DistributionSources is the sources.list line of the distribution
// repository served at host, signed by the keyring at keyring.
func DistributionSources(host, keyring string) string {
	return "deb [signed-by=" + keyring + "] http://" + host + DistributionPath + " /\n"
}

// Handler serves root/MINOR/FILE at pkgs.k8s.io's path of it,
// root/DistributionDir/FILE at DistributionPath and root/DockerDir/PATH
// at DockerPath, and nothing else: no listings, no other paths.
func Handler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read only", http.StatusMethodNotAllowed)
			return
		}
		var p string
		if m := repoPath.FindStringSubmatch(r.URL.Path); m != nil {
			p = filepath.Join(root, m[1], filepath.FromSlash(m[2]))
		} else if m := distributionPath.FindStringSubmatch(r.URL.Path); m != nil {
			p = filepath.Join(root, DistributionDir, filepath.FromSlash(m[1]))
		} else if m := dockerPath.FindStringSubmatch(r.URL.Path); m != nil {
			p = filepath.Join(root, DockerDir, filepath.FromSlash(m[1]))
		} else {
			http.NotFound(w, r)
			return
		}
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, p)
	})
}

// Serve serves root's repositories on ln until it fails.
func Serve(ln net.Listener, root string) error {
	srv := &http.Server{Handler: Handler(root), ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}
