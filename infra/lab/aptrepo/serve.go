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

// Handler serves root/MINOR/FILE at pkgs.k8s.io's path of it, and nothing
// else: no listings, no other paths.
func Handler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read only", http.StatusMethodNotAllowed)
			return
		}
		m := repoPath.FindStringSubmatch(r.URL.Path)
		if m == nil {
			http.NotFound(w, r)
			return
		}
		p := filepath.Join(root, m[1], filepath.FromSlash(m[2]))
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
