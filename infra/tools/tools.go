// Package tools finds the Kubernetes and etcd binaries that build-kube.sh
// and build-etcd.sh cache outside the repository, keyed by version.
package tools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// Versions the project builds and tests with. EtcdVersion and
// CorednsVersion are what kubeadm KubernetesVersion deploys (its `kubeadm
// config images list` names etcd:3.6.5-0 and coredns:v1.12.1).
const (
	KubernetesVersion = "v1.34.4"
	EtcdVersion       = "v3.6.5"
	CorednsVersion    = "v1.12.1"
	PulumiVersion     = "v3.274.1"
	// VersitygwVersion is the lab's S3 server (build-versitygw.sh).
	VersitygwVersion = "v1.8.0"
)

// The second version, the one `kubeadm upgrade` is tested against, and the
// etcd its kubeadm deploys (etcd:3.6.6-0 in kubeadm v1.35.4's image list).
// setup.sh builds both, cached by version like the first.
const (
	UpgradeKubernetesVersion = "v1.35.4"
	UpgradeEtcdVersion       = "v3.6.6"
	UpgradeCorednsVersion    = "v1.13.1"
)

// KubernetesDir and EtcdDir are the cache directories of one version's
// binaries (what build-kube.sh and build-etcd.sh fill for KUBE_VERSION and
// ETCD_VERSION).
func KubernetesDir(version string) string {
	return filepath.Join(CacheDir(), "tools", "kubernetes-"+version)
}

// EtcdDir: see KubernetesDir.
func EtcdDir(version string) string {
	return filepath.Join(CacheDir(), "tools", "etcd-"+version)
}

// CorednsDir is where build-coredns.sh caches CoreDNS of a version (v1.12.1).
func CorednsDir(version string) string {
	return filepath.Join(CacheDir(), "tools", "coredns-"+version)
}

// CacheDir is where the build scripts put their binaries.
func CacheDir() string {
	if d := os.Getenv(envvars.Cache); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "homelab")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "homelab")
}

// Dir returns the cache directory that holds a binary.
func Dir(name string) string {
	switch name {
	case "etcd", "etcdctl":
		return EtcdDir(EtcdVersion)
	case "pulumi", "pulumi-language-go":
		// The CLI finds its language hosts beside itself.
		return filepath.Join(CacheDir(), "tools", "pulumi-"+PulumiVersion)
	case "versitygw":
		return filepath.Join(CacheDir(), "tools", "versitygw-"+VersitygwVersion)
	}
	return KubernetesDir(KubernetesVersion)
}

// Path returns the cached binary, or an error naming the script that builds it.
func Path(name string) (string, error) {
	p := filepath.Join(Dir(name), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s is not built yet: run %s", name, versionOf(name), Script(name))
	}
	return p, nil
}

// Script is the repository script that builds the binary.
func Script(name string) string {
	s := "build-kube.sh"
	switch name {
	case "etcd", "etcdctl":
		s = "build-etcd.sh"
	case "pulumi":
		s = "build-pulumi.sh"
	case "versitygw":
		s = "build-versitygw.sh"
	case "pulumi-language-go":
		s = "setup.sh"
	}
	return filepath.Join(RepoRoot(), "infra", "tools", s)
}

// Build runs the script that builds the binary (reusing the cache) and
// returns the binary's path. Progress goes to stderr.
func Build(name string) (string, error) {
	cmd := exec.Command("bash", Script(name))
	cmd.Stderr = os.Stderr
	if _, err := cmd.Output(); err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	return Path(name)
}

func versionOf(name string) string {
	switch name {
	case "etcd", "etcdctl":
		return EtcdVersion
	case "pulumi", "pulumi-language-go":
		return PulumiVersion
	case "versitygw":
		return VersitygwVersion
	}
	return KubernetesVersion
}

// RepoRoot is the repository's root, found from this source file.
func RepoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(f)))
}
