package tools

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/envvars"
)

func script(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "infra", "tools", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The scripts' defaults are the versions the Go side looks for, and
// setup.sh builds the upgrade's second version as well.
func TestScriptsBuildTheDeclaredVersions(t *testing.T) {
	for name, want := range map[string]string{
		"build-kube.sh":    "version=${KUBE_VERSION:-" + KubernetesVersion + "}",
		"build-etcd.sh":    "version=${ETCD_VERSION:-" + EtcdVersion + "}",
		"build-coredns.sh": "version=${COREDNS_VERSION:-" + CorednsVersion + "}",
	} {
		if !strings.Contains(script(t, name), want) {
			t.Errorf("%s: no %q", name, want)
		}
	}
	setup := script(t, "setup.sh")
	for _, want := range []*regexp.Regexp{
		// Each build is a step (timed): step "NAME" [env VAR=VERSION] bash SCRIPT.
		regexp.MustCompile(`(?m)^step "[^"]+" bash "\$here/build-etcd.sh"`),
		regexp.MustCompile(`(?m)^step "[^"]+" bash "\$here/build-kube.sh"`),
		regexp.MustCompile(`(?m)^step "[^"]+" env ETCD_VERSION=` + regexp.QuoteMeta(UpgradeEtcdVersion) + ` bash "\$here/build-etcd.sh"`),
		regexp.MustCompile(`(?m)^step "[^"]+" env KUBE_VERSION=` + regexp.QuoteMeta(UpgradeKubernetesVersion) + ` bash "\$here/build-kube.sh"`),
		regexp.MustCompile(`(?m)^step "[^"]+" bash "\$here/build-coredns.sh"`),
		regexp.MustCompile(`(?m)^step "[^"]+" env COREDNS_VERSION=` + regexp.QuoteMeta(UpgradeCorednsVersion) + ` bash "\$here/build-coredns.sh"`),
	} {
		if !want.MatchString(setup) {
			t.Errorf("setup.sh: no line matching %s", want)
		}
	}
}

func TestDirs(t *testing.T) {
	t.Setenv(envvars.Cache, "/c")
	if got := KubernetesDir(UpgradeKubernetesVersion); got != "/c/tools/kubernetes-"+UpgradeKubernetesVersion {
		t.Errorf("KubernetesDir %s", got)
	}
	if got := EtcdDir(UpgradeEtcdVersion); got != "/c/tools/etcd-"+UpgradeEtcdVersion {
		t.Errorf("EtcdDir %s", got)
	}
	if Dir("etcd") != EtcdDir(EtcdVersion) || Dir("kubeadm") != KubernetesDir(KubernetesVersion) {
		t.Errorf("Dir: %s %s", Dir("etcd"), Dir("kubeadm"))
	}
}

// Each Kubernetes version's kubeadm deploys the etcd and CoreDNS paired
// with it here (checked with the cached kubeadm, when it is built).
func TestEtcdIsWhatKubeadmDeploys(t *testing.T) {
	for kube, want := range map[string][]string{
		KubernetesVersion:        {"registry.k8s.io/etcd:" + strings.TrimPrefix(EtcdVersion, "v") + "-0", "registry.k8s.io/coredns/coredns:" + CorednsVersion},
		UpgradeKubernetesVersion: {"registry.k8s.io/etcd:" + strings.TrimPrefix(UpgradeEtcdVersion, "v") + "-0", "registry.k8s.io/coredns/coredns:" + UpgradeCorednsVersion},
	} {
		kubeadm := filepath.Join(KubernetesDir(kube), "kubeadm")
		if _, err := os.Stat(kubeadm); err != nil {
			t.Logf("kubeadm %s is not built: not checked", kube)
			continue
		}
		out, err := exec.Command(kubeadm, "config", "images", "list", "--kubernetes-version", kube).Output()
		if err != nil {
			t.Fatalf("kubeadm %s config images list: %v", kube, err)
		}
		for _, w := range want {
			if !strings.Contains(" "+strings.Join(strings.Fields(string(out)), " ")+" ", " "+w+" ") {
				t.Errorf("kubeadm %s lists %q, not %s", kube, out, w)
			}
		}
	}
}

// The README's test command is what a new user copies; CI must run exactly
// it, with nothing added that could make CI pass where the user's run fails
// (issue 38: CI's own -timeout hid the README command's timeout).
func TestCIRunsTheREADMETestCommand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Run the tests:\n\n    (\S.*)\n`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md: no indented command after \"Run the tests:\"")
	}
	want := string(m[1])

	ci, err := os.ReadFile(filepath.Join(RepoRoot(), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	// Only the shell's strictness and the move to the checkout's root may
	// stand beside the command: neither changes what the command does.
	preamble := map[string]bool{`set -euo pipefail`: true, `cd "$(dirname "$0")/.."`: true}
	var commands []string
	for _, line := range strings.Split(string(ci), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || preamble[line] {
			continue
		}
		commands = append(commands, line)
	}
	if len(commands) != 1 || commands[0] != want {
		t.Errorf(".ci/run runs %q; the README's test command is %q and must be all it runs", commands, want)
	}
}

// skipAllowed are the only files that may skip a test outright, each for
// a reason CI's run shares: everything else that cannot run for want of a
// tool, a package or root calls toolstest.Missing, which fails under
// HOMELAB_REQUIRE_TOOLS=1, so CI never passes with a test unrun.
var skipAllowed = map[string]string{
	"infra/tools/toolstest/toolstest.go":            "Missing itself",
	"infra/lab/labtest/labtest.go":                  "lab tests without HOMELAB_E2E=1, which the README's test command sets",
	"infra/lab/helpers_test.go":                     "the same gate for infra/lab's own lab tests",
	"infra/lab/standin/kubelet/integration_test.go": "go test -short, which CI does not pass",
	"inventory/paths_test.go":                       "a machine with no home directory, where ~ has nothing to expand to",
}

func TestSkipsFailInCI(t *testing.T) {
	root := RepoRoot()
	skip := regexp.MustCompile(`\b(t|b|tb)\.Skip(f|Now)?\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if _, ok := skipAllowed[rel]; ok {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if skip.MatchString(line) {
				t.Errorf("%s:%d skips outright: call toolstest.Missing, which fails in CI (or add the file to skipAllowed with the reason CI may skip it): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
