package aptrepo_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/lab/aptrepo"
	"github.com/homelab-dev/homelab/infra/lab/aptrepo/apttest"
	"github.com/homelab-dev/homelab/roles/kubepkg"
)

// fakeBinaries are scripts standing in for one version's binaries: these
// tests are about the packages and the repository, not what they carry.
func fakeBinaries(t *testing.T, v string) aptrepo.Binaries {
	t.Helper()
	dir := filepath.Join(t.TempDir(), v)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := aptrepo.Binaries{Version: v}
	for name, p := range map[string]*string{"kubeadm": &b.Kubeadm, "kubectl": &b.Kubectl, "kubelet": &b.Kubelet} {
		*p = filepath.Join(dir, name)
		script := fmt.Sprintf("#!/bin/sh\necho %s %s\n", name, v)
		if err := os.WriteFile(*p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			toolstest.Missing(t, fmt.Sprintf("needs %s: %v", c, err))
		}
	}
}

type built struct {
	root string // root/MINOR is a repository
	key  *aptrepo.Key
	arch string
}

// buildRepos writes one repository per minor of versions, from fake
// binaries, into a temporary directory.
func buildRepos(t *testing.T, versions ...string) built {
	t.Helper()
	need(t, "dpkg-deb", "gpg", "gpgconf")
	arch, err := aptrepo.Arch()
	if err != nil {
		t.Fatal(err)
	}
	root, key := apttest.Repos(t, t.TempDir(), func(v string) aptrepo.Binaries { return fakeBinaries(t, v) }, versions...)
	return built{root: root, key: key, arch: arch}
}

// paragraphs reads a Packages file into field maps.
func paragraphs(t *testing.T, data []byte) []map[string]string {
	var out []map[string]string
	cur := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = map[string]string{}
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("odd Packages line %q", line)
		}
		cur[k] = v
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func TestRepositoryLayoutAndIndex(t *testing.T) {
	b := buildRepos(t, "v1.34.4", "v1.34.3")
	dir := filepath.Join(b.root, "v1.34")
	for _, f := range []string{"Packages", "Packages.gz", "Release", "InRelease", "Release.gpg", "Release.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	index, err := os.ReadFile(filepath.Join(dir, "Packages"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, p := range paragraphs(t, index) {
		got[p["Package"]+"="+p["Version"]] = p
		// Every entry points at its file, with the file's size and hash.
		data, err := os.ReadFile(filepath.Join(dir, p["Filename"]))
		if err != nil {
			t.Errorf("%s: %v", p["Filename"], err)
			continue
		}
		if p["SHA256"] != fmt.Sprintf("%x", sha256.Sum256(data)) || p["Size"] != fmt.Sprint(len(data)) {
			t.Errorf("%s: index says %s/%s", p["Filename"], p["Size"], p["SHA256"])
		}
		if !strings.HasPrefix(p["Filename"], b.arch+"/") {
			t.Errorf("%s is not under %s/ as on pkgs.k8s.io", p["Filename"], b.arch)
		}
	}
	for _, want := range []string{"kubeadm=1.34.4-1.1", "kubelet=1.34.4-1.1", "kubectl=1.34.4-1.1", "kubeadm=1.34.3-1.1", "cri-tools=1.34.0-1.1", "kubernetes-cni=1.7.1-1.1"} {
		if got[want] == nil {
			t.Errorf("no %s in the index", want)
		}
	}
	if len(got) != 8 {
		t.Errorf("%d packages, want 8 (the dependencies once)", len(got))
	}
	if d := got["kubelet=1.34.4-1.1"]["Depends"]; !strings.Contains(d, "kubernetes-cni (>= 1.2.0)") {
		t.Errorf("kubelet Depends: %q", d)
	}
	if d := got["kubeadm=1.34.4-1.1"]["Depends"]; d != "cri-tools (>= 1.30.0)" {
		t.Errorf("kubeadm Depends: %q", d)
	}
	// The Release lists the index with its hash, and the signatures are
	// the lab key's: gpgv checks them with the keyring alone.
	rel, _ := os.ReadFile(filepath.Join(dir, "Release"))
	if !strings.Contains(string(rel), fmt.Sprintf(" %x %d Packages\n", sha256.Sum256(index), len(index))) {
		t.Errorf("Release does not list Packages' hash:\n%s", rel)
	}
	need(t, "gpgv")
	if out, err := exec.Command("gpgv", "--keyring", b.key.Keyring(), filepath.Join(dir, "InRelease")).CombinedOutput(); err != nil {
		t.Errorf("InRelease does not verify with the keyring: %v\n%s", err, out)
	}
	if out, err := exec.Command("gpgv", "--keyring", b.key.Keyring(), filepath.Join(dir, "Release.gpg"), filepath.Join(dir, "Release")).CombinedOutput(); err != nil {
		t.Errorf("Release.gpg does not verify: %v\n%s", err, out)
	}
	other := buildRepos(t, "v1.34.4")
	if err := exec.Command("gpgv", "--keyring", other.key.Keyring(), filepath.Join(dir, "InRelease")).Run(); err == nil {
		t.Error("another key's keyring verifies the lab's InRelease")
	}
	// The keyring is what kubeadm's guide makes with gpg --dearmor.
	armored, _ := os.ReadFile(filepath.Join(dir, "Release.key"))
	cmd := exec.Command("gpg", "--dearmor")
	cmd.Stdin = bytes.NewReader(armored)
	dearmored, err := cmd.Output()
	keyring, _ := os.ReadFile(b.key.Keyring())
	if err != nil || !bytes.Equal(dearmored, keyring) {
		t.Errorf("the keyring is not Release.key dearmored (%v)", err)
	}
}

// A second build of the same inputs is the cached .deb; a changed binary
// rebuilds it.
func TestBuildIsCachedByInputs(t *testing.T) {
	need(t, "dpkg-deb")
	arch, _ := aptrepo.Arch()
	bins := fakeBinaries(t, "v1.34.4")
	specs, _ := aptrepo.Specs(bins)
	dir := t.TempDir()
	first, err := aptrepo.Build(dir, arch, specs[2])
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(first)
	again, _ := aptrepo.Build(dir, arch, specs[2])
	st2, _ := os.Stat(again)
	if again != first || !os.SameFile(st1, st2) {
		t.Error("rebuilt with the same inputs")
	}
	if err := os.WriteFile(bins.Kubectl, []byte("#!/bin/sh\necho rebuilt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	third, _ := aptrepo.Build(dir, arch, specs[2])
	st3, _ := os.Stat(third)
	if os.SameFile(st1, st3) {
		t.Error("a changed binary did not rebuild the package")
	}
	out, _ := exec.Command("dpkg-deb", "--fsys-tarfile", third).Output()
	if !bytes.Contains(out, []byte("echo rebuilt")) {
		t.Error("the rebuilt package does not carry the new binary")
	}
}

func TestHandlerServesPkgsK8sIOPaths(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "v1.34", "amd64"), 0o755)
	os.WriteFile(filepath.Join(root, "v1.34", "InRelease"), []byte("signed"), 0o644)
	os.WriteFile(filepath.Join(root, "v1.34", "amd64", "kubeadm_1.34.4-1.1_amd64.deb"), []byte("deb"), 0o644)
	os.WriteFile(filepath.Join(root, "secret"), []byte("no"), 0o644)
	os.MkdirAll(filepath.Join(root, "docker", "dists", "bookworm", "stable", "binary-amd64"), 0o755)
	os.WriteFile(filepath.Join(root, "docker", "dists", "bookworm", "stable", "binary-amd64", "Packages"), []byte("index"), 0o644)
	os.WriteFile(filepath.Join(root, "docker", "gpg"), []byte("key"), 0o644)
	srv := httptest.NewServer(aptrepo.Handler(root))
	defer srv.Close()
	for path, want := range map[string]int{
		"/core:/stable:/v1.34/deb/InRelease":                               200,
		"/core:/stable:/v1.34/deb/amd64/kubeadm_1.34.4-1.1_amd64.deb":      200,
		"/core:/stable:/v1.35/deb/InRelease":                               404,
		"/core:/stable:/v1.34/deb/":                                        404,
		"/core:/stable:/v1.34/deb/amd64":                                   404,
		"/core:/stable:/v1.34/deb/../secret":                               404,
		"/core:/stable:/v1.34/deb/.hidden":                                 404,
		"/v1.34/InRelease":                                                 404,
		"/docker/linux/debian/dists/bookworm/stable/binary-amd64/Packages": 200,
		"/docker/linux/debian/gpg":                                         200,
		"/docker/linux/debian/dists/bookworm/../../../secret":              404,
		"/docker/linux/debian/dists/.bookworm/Release":                     404,
		"/docker/linux/debian/dists":                                       404,
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if got := aptrepo.Repository("10.77.0.1"); got != "http://10.77.0.1/core:/stable:/{minor}/deb/" {
		t.Errorf("repository template %q", got)
	}
}

// sources points the throwaway root at the served repository of a minor,
// trusting keyring for it only, as kubepkg renders it for nodes.
func sources(t *testing.T, r *apttest.Root, base, minor string, keyring []byte) {
	t.Helper()
	ex := r.Executor()
	if err := ex.Upload(t.Context(), kubepkg.KeyringPath, keyring, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ex.Upload(t.Context(), kubepkg.SourcesPath, kubepkg.Sources(base+aptrepo.PathPrefix+minor+aptrepo.PathSuffix), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The real apt against the lab's repository: signed, it resolves
// kubeadm=VERSION to that version and installs it with what it depends
// on; unsigned or signed by another key, apt refuses it.
func TestAptInstallsFromTheRepository(t *testing.T) {
	b := buildRepos(t, "v1.34.4", "v1.34.3")
	r := apttest.New(t)
	r.Forget(aptrepo.Names...)
	base := r.Serve(b.root)
	keyring, _ := os.ReadFile(b.key.Keyring())
	sources(t, r, base, "v1.34", keyring)
	r.Sh("apt-get update -q")
	if out := r.Sh("apt-cache madison kubeadm"); !strings.Contains(out, "1.34.4-1.1") || !strings.Contains(out, "1.34.3-1.1") {
		t.Errorf("madison:\n%s", out)
	}
	r.Sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q 'kubeadm=1.34.3-*' 'kubelet=1.34.3-*' 'kubectl=1.34.3-*'")
	versions := r.Sh("dpkg-query -W -f='${Package} ${Version}\\n' kubeadm kubelet kubectl cri-tools kubernetes-cni")
	for _, want := range []string{"kubeadm 1.34.3-1.1", "kubelet 1.34.3-1.1", "kubectl 1.34.3-1.1", "cri-tools 1.34.0-1.1", "kubernetes-cni 1.7.1-1.1"} {
		if !strings.Contains(versions, want) {
			t.Errorf("dpkg has not %s:\n%s", want, versions)
		}
	}
	if out := r.Sh("kubeadm; kubelet"); out != "kubeadm v1.34.3\nkubelet v1.34.3\n" {
		t.Errorf("installed binaries say %q", out)
	}
	for _, f := range []string{"/usr/lib/systemd/system/kubelet.service", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", "/etc/default/kubelet"} {
		r.Sh("test -s " + f)
	}
	r.Sh("dpkg --verify kubeadm kubelet kubectl")
	// None of it reached this machine.
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "kubeadm").Output(); err == nil && strings.HasPrefix(string(out), "1.34.3-1.1") {
		t.Error("the install reached this machine's dpkg database")
	}

	t.Run("unsigned", func(t *testing.T) {
		for _, f := range []string{"InRelease", "Release.gpg"} {
			os.Remove(filepath.Join(b.root, "v1.34", f))
		}
		res, _ := r.Run(t.Context(), "apt-get update -q", nil)
		if res.ExitCode == 0 {
			t.Errorf("apt-get update took an unsigned repository:\n%s%s", res.Stdout, res.Stderr)
		}
		if !strings.Contains(string(res.Stderr), "signed") {
			t.Errorf("apt-get update did not say why:\n%s", res.Stderr)
		}
	})
	t.Run("signed by another key", func(t *testing.T) {
		other := buildRepos(t, "v1.34.4")
		base := r.Serve(other.root)
		sources(t, r, base, "v1.34", keyring)
		res, _ := r.Run(t.Context(), "apt-get update -q", nil)
		if res.ExitCode == 0 {
			t.Errorf("apt-get update took a repository signed by another key:\n%s%s", res.Stdout, res.Stderr)
		}
		if !strings.Contains(string(res.Stdout)+string(res.Stderr), "NO_PUBKEY") {
			t.Errorf("apt-get update did not name the unknown key:\n%s%s", res.Stdout, res.Stderr)
		}
		res, _ = r.Run(t.Context(), "apt-get install -s 'kubeadm=1.34.4-*'", nil)
		if res.ExitCode == 0 {
			t.Errorf("apt would install from it:\n%s", res.Stdout)
		}
	})
}

// A key kept under a long path still signs: the agent's sockets would not
// fit there.
func TestKeyUnderALongPath(t *testing.T) {
	need(t, "gpg", "gpgconf", "gpgv")
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-lab-directory-", 5), "apt")
	key, err := aptrepo.OpenKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "Release"), []byte("Origin: test\n"), 0o644)
	if err := key.Sign(repo); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gpgv", "--keyring", key.Keyring(), filepath.Join(repo, "InRelease")).CombinedOutput(); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	links, _ := filepath.Glob(filepath.Join(os.TempDir(), "hlgpg*", "h"))
	for _, l := range links {
		if target, _ := os.Readlink(l); strings.HasPrefix(target, dir) {
			t.Errorf("short link %s left behind", l)
		}
	}
}
