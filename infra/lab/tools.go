package lab

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/nodestatus"
	"github.com/homelab-dev/homelab/infra/tools"
)

const (
	modulePath = "github.com/homelab-dev/homelab"
	// EnvNodeBin names a prebuilt homelab-node binary to use instead of
	// building ./cmd/homelab-node.
	EnvNodeBin = envvars.NodeBin
	// EnvKubeDir and EnvEtcdDir name directories holding prebuilt binaries
	// instead of running infra/tools/build-*.sh.
	EnvKubeDir = envvars.KubeDir
	EnvEtcdDir = envvars.EtcdDir
)

var (
	kubeBins = []string{"kubeadm", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}
	etcdBins = []string{"etcd", "etcdctl"}
	// etcdVersion is what kubeadm 1.34 deploys (build-etcd.sh's default);
	// other etcd images are filled from the tools cache (imageBinaries).
	etcdVersion = tools.EtcdVersion
	// standIns are the names the homelab-node multi-call binary answers to.
	standIns = []string{"kubelet", "systemctl", "containerd"}
)

// repoRoot finds this module's checkout from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside a checkout of %s: run from the repository or set $%s, $%s and $%s", modulePath, EnvNodeBin, EnvKubeDir, EnvEtcdDir)
		}
		dir = parent
	}
}

// buildScript runs infra/tools/build-NAME.sh, which reuses its cache and
// prints the directory holding the binaries; its progress goes to the log.
func (l *Lab) buildScript(root, name string, env ...string) (string, error) {
	cmd := exec.Command("bash", filepath.Join(root, "infra/tools", "build-"+name+".sh"))
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = l.logWriter()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("infra/tools/build-%s.sh: %w", name, err)
	}
	dir := strings.TrimSpace(lastLine(out.String()))
	if d := time.Since(start); d > 5*time.Second {
		l.logf("lab: %s binaries ready in %s", name, d.Round(time.Second))
	}
	return dir, nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func (l *Lab) logWriter() io.Writer {
	if l.Log == nil {
		return io.Discard
	}
	return l.Log
}

// binDir returns a directory with all the named binaries: the override,
// else what the build script prints (it builds on first use).
func (l *Lab) binDir(env, script string, bins []string, root string, rootErr error, cached string, scriptEnv ...string) (string, error) {
	if d := os.Getenv(env); d != "" {
		return d, checkBins(d, bins)
	}
	if rootErr != nil {
		// Outside a checkout, what an earlier build cached still serves.
		if d := filepath.Join(toolCache(), cached); checkBins(d, bins) == nil {
			return d, nil
		}
		return "", rootErr
	}
	d, err := l.buildScript(root, script, scriptEnv...)
	if err != nil {
		return "", err
	}
	return d, checkBins(d, bins)
}

// toolCache is where infra/tools/build-*.sh cache their builds.
func toolCache() string { return filepath.Join(tools.CacheDir(), "tools") }

func checkBins(dir string, bins []string) error {
	for _, b := range bins {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s has no executable %s", dir, b)
		}
	}
	return nil
}

// nodeBinary returns the homelab-node binary, rebuilt only when a source
// file it depends on is newer than the last build (a relink costs seconds
// on two cores; lab up should not).
func (l *Lab) nodeBinary(root string, rootErr error) (string, error) {
	if p := os.Getenv(EnvNodeBin); p != "" {
		return p, checkBins(filepath.Dir(p), []string{filepath.Base(p)})
	}
	if rootErr != nil {
		return "", rootErr
	}
	return l.buildNode(root, "homelab-node", "the kubelet, systemctl, containerd and init stand-ins")
}

// kubeletStandIn returns homelab-node built to report Kubernetes version
// v as the kubelet: what the lab's kubelet package of v carries.
func (l *Lab) kubeletStandIn(root string, rootErr error, v string) (string, error) {
	if rootErr != nil {
		return "", rootErr
	}
	return l.buildNode(root, "kubelet-"+v, "the kubelet stand-in reporting "+v, nodestatus.VersionFlag(v))
}

// buildNode builds ./cmd/homelab-node as name, rebuilt only when a source
// file it depends on is newer than the last build. Cached outside the lab
// directory, which down removes, and per checkout, since staleness is
// judged by this checkout's sources.
func (l *Lab) buildNode(root, name, what string, ldflags ...string) (string, error) {
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(toolCache(), "homelab-node", hex.EncodeToString(sum[:6]), name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	if st, err := os.Stat(out); err == nil {
		newest, err := newestSource(root, "./cmd/homelab-node")
		if err == nil && !newest.After(st.ModTime()) {
			return out, nil
		}
	}
	l.logf("lab: building homelab-node (%s)", what)
	args := []string{"build", "-o", out + ".tmp"}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	cmd := exec.Command("go", append(args, "./cmd/homelab-node")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout = l.logWriter()
	cmd.Stderr = l.logWriter()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/homelab-node (%s): %w", what, err)
	}
	return out, os.Rename(out+".tmp", out)
}

// newestSource returns the newest modification time among the module's
// own source files a package depends on, and go.mod/go.sum.
func newestSource(root, pkg string) (time.Time, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}, err
	}
	var newest time.Time
	consider := func(p string) {
		if st, err := os.Stat(p); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	consider(filepath.Join(root, "go.mod"))
	consider(filepath.Join(root, "go.sum"))
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		dir := strings.TrimSpace(sc.Text())
		if dir == "" {
			continue
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !e.IsDir() {
				consider(filepath.Join(dir, e.Name()))
			}
		}
	}
	return newest, nil
}

// buildTools assembles the read-only layer laid over every node's /usr:
// the real binaries where a package would put them, and the homelab-node
// stand-ins under the names a node calls them by. A packaged lab's nodes
// get kubeadm, kubelet and kubectl from its apt repository instead, as a
// fresh machine has none of them.
func (l *Lab) buildTools(kubeVersion string, packaged bool) (string, error) {
	root, rootErr := repoRoot()
	kube, err := l.binDir(EnvKubeDir, "kube", kubeBins, root, rootErr, "kubernetes-"+kubeVersion, "KUBE_VERSION="+kubeVersion)
	if err != nil {
		return "", err
	}
	etcd, err := l.binDir(EnvEtcdDir, "etcd", etcdBins, root, rootErr, "etcd-"+etcdVersion)
	if err != nil {
		return "", err
	}
	node, err := l.nodeBinary(root, rootErr)
	if err != nil {
		return "", err
	}
	dir := l.toolsDir()
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	bin := filepath.Join(tmp, "usr", "bin")
	local := filepath.Join(tmp, "usr", "local", "bin")
	for _, d := range []string{bin, local} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	for _, b := range kubeBins {
		if packaged && slices.Contains(aptrepo.PackagedBinaries, b) {
			continue
		}
		if err := linkOrCopy(filepath.Join(kube, b), filepath.Join(bin, b)); err != nil {
			return "", err
		}
	}
	for _, b := range etcdBins {
		if err := linkOrCopy(filepath.Join(etcd, b), filepath.Join(bin, b)); err != nil {
			return "", err
		}
	}
	if err := linkOrCopy(node, filepath.Join(local, "homelab-node")); err != nil {
		return "", err
	}
	// Hard links, not symlinks: a multi-call binary that looks at
	// /proc/self/exe sees the name it was started by only this way.
	for _, b := range standIns {
		if packaged && slices.Contains(aptrepo.PackagedBinaries, b) {
			continue
		}
		if err := linkOrCopy(node, filepath.Join(bin, b)); err != nil {
			return "", err
		}
	}
	if err := l.buildImages(filepath.Join(tmp, filepath.FromSlash(images.Root)), kubeVersion, kube, etcd, node); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}

// controlPlaneImages are the images whose binaries kubeadm's static pods
// run: the image's base name is the binary's.
var controlPlaneImages = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// buildImages lays out the lab's image tree (infra/lab/standin/images):
// every image kubeadm lists for each Kubernetes version the lab has (the
// declared one from kube, the others from the tools cache), the
// control-plane ones with their binaries, each etcd tag with the etcd of
// its version (the lab's, etcd, or the tools cache's), pause with the
// stand-in node (the homelab-node binary, which runs as pause by that
// name), the rest (coredns, kube-proxy: nothing here runs them) empty. An
// etcd tag whose etcd is not cached is left out, so its static pod fails to
// start, as a pull of an image the registry lacks does.
func (l *Lab) buildImages(root, kubeVersion, kube, etcd, node string) error {
	return l.eachKubeadmImage(kubeVersion, kube, etcd, node, func(ref string, bins map[string]string) error {
		return images.Add(root, ref, bins, linkOrCopy)
	})
}

// eachKubeadmImage calls add with every image kubeadm lists for each
// Kubernetes version the lab has (the declared one from kube, the others
// from the tools cache) and the binaries it holds (imageBinaries), each
// image once. An etcd tag whose etcd is not cached is left out (logged).
func (l *Lab) eachKubeadmImage(kubeVersion, kube, etcd, node string, add func(ref string, bins map[string]string) error) error {
	dirs := map[string]string{kubeVersion: kube}
	if cached, err := cachedKubeVersions(); err == nil {
		for _, v := range cached {
			if _, ok := dirs[v]; !ok {
				dirs[v] = tools.KubernetesDir(v)
			}
		}
	}
	done := map[string]bool{}
	for _, v := range slices.Sorted(maps.Keys(dirs)) {
		d := dirs[v]
		if checkBins(d, append([]string{"kubeadm"}, controlPlaneImages...)) != nil {
			continue
		}
		out, err := exec.Command(filepath.Join(d, "kubeadm"), "config", "images", "list", "--kubernetes-version", v).Output()
		if err != nil {
			return fmt.Errorf("kubeadm %s config images list: %w", v, err)
		}
		for _, ref := range strings.Fields(string(out)) {
			if done[ref] {
				continue // listed by another version too
			}
			bins, err := imageBinaries(ref, d, etcd, node)
			var missing errNoEtcd
			if errors.As(err, &missing) {
				l.logf("lab: no %s image (%v): a v%s control plane's etcd will not start", ref, err, strings.TrimPrefix(v, "v"))
				continue
			}
			if err != nil {
				return fmt.Errorf("kubeadm %s lists %w", v, err)
			}
			if err := add(ref, bins); err != nil {
				return err
			}
			done[ref] = true
		}
	}
	return nil
}

// errNoEtcd: the etcd an image tag names is not cached.
type errNoEtcd struct{ version string }

func (e errNoEtcd) Error() string {
	return fmt.Sprintf("etcd %s is not cached: ETCD_VERSION=%s infra/tools/build-etcd.sh builds it", e.version, e.version)
}

// imageBinaries is what the image ref of kubeadm's list holds: kube is the
// directory of that Kubernetes version's binaries, etcd the lab's etcd
// (etcdVersion's), node the homelab-node binary.
func imageBinaries(ref, kube, etcd, node string) (map[string]string, error) {
	repo, tag, err := images.Ref(ref)
	if err != nil {
		return nil, err
	}
	name := path.Base(repo)
	bins := map[string]string{}
	switch {
	case slices.Contains(controlPlaneImages, name):
		bins[name] = filepath.Join(kube, name)
	case name == "etcd":
		// etcd:3.6.6-0 is etcd v3.6.6 (the suffix is the image's revision).
		v, _, _ := strings.Cut(tag, "-")
		v = "v" + v
		dir := etcd
		if v != etcdVersion {
			dir = tools.EtcdDir(v)
		}
		if checkBins(dir, etcdBins) != nil {
			return nil, errNoEtcd{v}
		}
		for _, b := range etcdBins {
			bins[b] = filepath.Join(dir, b)
		}
	case name == "pause":
		bins["pause"] = node
	case name == "kube-proxy":
		// Older caches lack it (build-kube.sh builds it since issue 30's
		// registry): the image is then absent, as the stand-ins need it
		// not.
		if checkBins(kube, []string{name}) == nil {
			bins[name] = filepath.Join(kube, name)
		}
	case name == "coredns":
		if dir := tools.CorednsDir(tag); checkBins(dir, []string{name}) == nil {
			bins[name] = filepath.Join(dir, name)
		}
	}
	return bins, nil
}

// linkOrCopy hard-links (instant, no space) or copies across filesystems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrExist) && !isCrossDevice(err) {
		return err
	}
	// dst may be a link to src already: truncating it would empty src.
	if a, err := os.Stat(src); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func isCrossDevice(err error) bool {
	var le *os.LinkError
	return errors.As(err, &le) && strings.Contains(le.Err.Error(), "cross-device")
}

// systemdBins are what a real node has in /usr/bin from the lab: what the
// Kubernetes packages would install (the real kubelet among them) and the
// etcdctl the provisioner's etcd steps run. Everything else a real node
// runs comes from its rootfs or its images.
var systemdBins = []string{"kubeadm", "kubectl", "kubelet"}

// udevadmStandIn answers netplan apply's udevadm trigger and settle, which
// need a udev no node can run (udevadm.sh says why).
//
//go:embed udevadm.sh
var udevadmStandIn []byte

// buildSystemd returns the real nodes' rootfs (built once by
// infra/tools/build-rootfs.sh) and assembles the layer laid over their
// /usr: systemdBins of kubeVersion (none the lab's packages install, when
// packaged) and etcdctl. Their images come from
// the lab's registry (buildRegistry).
func (l *Lab) buildSystemd(kubeVersion string, packaged bool) (rootfs, layer string, err error) {
	root, rootErr := repoRoot()
	if rootErr != nil {
		return "", "", rootErr
	}
	if rootfs, err = l.buildScript(root, "rootfs"); err != nil {
		return "", "", err
	}
	kube, err := l.binDir(EnvKubeDir, "kube", systemdBins, root, rootErr, "kubernetes-"+kubeVersion, "KUBE_VERSION="+kubeVersion)
	if err != nil {
		return "", "", err
	}
	etcd, err := l.binDir(EnvEtcdDir, "etcd", etcdBins, root, rootErr, "etcd-"+etcdVersion)
	if err != nil {
		return "", "", err
	}
	dir := l.systemdToolsDir()
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return "", "", err
	}
	bin := filepath.Join(tmp, "usr", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", "", err
	}
	for _, b := range systemdBins {
		if packaged && slices.Contains(aptrepo.PackagedBinaries, b) {
			continue // the node gets it from the lab's apt repository
		}
		if err := linkOrCopy(filepath.Join(kube, b), filepath.Join(bin, b)); err != nil {
			return "", "", err
		}
	}
	if err := linkOrCopy(filepath.Join(etcd, "etcdctl"), filepath.Join(bin, "etcdctl")); err != nil {
		return "", "", err
	}
	sbin := filepath.Join(tmp, "usr", "local", "sbin")
	if err := os.MkdirAll(sbin, 0o755); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(sbin, "udevadm"), udevadmStandIn, 0o755); err != nil {
		return "", "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", "", err
	}
	return rootfs, dir, os.Rename(tmp, dir)
}

// sandboxImage is the pause image kubeadm of that version deploys.
func sandboxImage(kubeadm, version string) (string, error) {
	out, err := exec.Command(kubeadm, "config", "images", "list", "--kubernetes-version", version).Output()
	if err != nil {
		return "", fmt.Errorf("kubeadm %s config images list: %w", version, err)
	}
	for _, ref := range strings.Fields(string(out)) {
		if repo, _, err := images.Ref(ref); err == nil && path.Base(repo) == "pause" {
			return ref, nil
		}
	}
	return "", fmt.Errorf("kubeadm %s lists no pause image", version)
}
