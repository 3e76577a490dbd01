package provider

import (
	"context"
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/gpu"
	"github.com/homelab-dev/homelab/roles/kubepkg"
)

func toolkitArgs() PackageArgs {
	return PackageArgs{
		Connection: Connection{Node: "gpu-1", Host: "10.0.0.130"},
		Names:      gpu.ToolkitPackages,
		Version:    "1.20.0-1",
		Repository: &AptRepository{KeyURL: gpu.ToolkitKeyURL, Keyring: gpu.ToolkitKeyring, SourcesPath: gpu.ToolkitSourcesPath, Sources: string(gpu.ToolkitSources())},
		Restart:    "containerd", Trigger: "abc", RequireNvidiaGPU: true, DeclaredGPUs: 1,
	}
}

func dpkgLines(status, version string, names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("pkg=" + n + " " + status + " " + version + "\n")
	}
	return b.String()
}

func TestPackageStatus(t *testing.T) {
	in := toolkitArgs()
	const gpuLine = "smi=GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)\npci=0000:01:00.0 0x030000\n"
	for _, tc := range []struct {
		name   string
		out    string
		status string
		gpus   int
	}{
		{"emulated homelab: no GPU, no packages", "", PackageSkippedNoGPU, 0},
		{"no GPU, packages there anyway", dpkgLines("ii", "1.20.0-1", gpu.ToolkitPackages...), PackageSkippedNoGPU, 0},
		{"GPU, nothing installed", gpuLine, PackageMissing, 1},
		{"GPU, pinned version, held", gpuLine + dpkgLines("hi", "1.20.0-1", gpu.ToolkitPackages...), PackageInstalled, 1},
		{"GPU, pinned version, not held", gpuLine + dpkgLines("ii", "1.20.0-1", gpu.ToolkitPackages...), PackageNotHeld, 1},
		{"GPU, held but only unpacked", gpuLine + dpkgLines("hU", "1.20.0-1", gpu.ToolkitPackages...), PackageMissing, 1},
		{"GPU, older toolkit", gpuLine + dpkgLines("ii", "1.17.8-1", gpu.ToolkitPackages...), PackageOtherVersion, 1},
		{"GPU, one library missing", gpuLine + dpkgLines("ii", "1.20.0-1", gpu.ToolkitPackages[:3]...), PackageMissing, 1},
		{"GPU, removed with config left", gpuLine + dpkgLines("rc", "1.20.0-1", gpu.ToolkitPackages...), PackageMissing, 1},
		{"card without driver still counts", "pci=0000:01:00.0 0x030000\n", PackageMissing, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := parsePackageQuery(in.Names, tc.out).state(in)
			if st.Status != tc.status || st.DetectedGPUs != tc.gpus {
				t.Errorf("status %q, %d GPUs; want %q, %d", st.Status, st.DetectedGPUs, tc.status, tc.gpus)
			}
			if !slices.Equal(slices.Sorted(maps.Keys(st.Versions)), slices.Sorted(slices.Values(in.Names))) {
				t.Errorf("versions for %v", st.Versions)
			}
		})
	}
	// Without RequireNvidiaGPU nothing is skipped.
	plain := in
	plain.RequireNvidiaGPU = false
	if st := parsePackageQuery(plain.Names, "").state(plain); st.Status != PackageMissing {
		t.Errorf("a plain package was %q", st.Status)
	}
}

func TestPackageDiff(t *testing.T) {
	in := toolkitArgs()
	installed := PackageState{PackageArgs: in, Status: PackageInstalled, DetectedGPUs: 1}
	skipped := PackageState{PackageArgs: in, Status: PackageSkippedNoGPU}
	withVersion := func(v string) PackageArgs { a := in; a.Version = v; return a }
	withTrigger := func(tr string) PackageArgs { a := in; a.Trigger = tr; return a }
	moved := in
	moved.Connection.Host = "10.0.0.140"
	other := in
	other.Connection.Node = "gpu-2"
	for _, tc := range []struct {
		name string
		in   PackageArgs
		st   PackageState
		want map[string]p.DiffKind
	}{
		{"converged", in, installed, nil},
		{"skipped stays quiet (the emulated homelab's second up)", in, skipped, nil},
		{"new pin", withVersion("1.20.1-1"), installed, map[string]p.DiffKind{"pinnedVersion": p.Update}},
		{"new pin while skipped is recorded", withVersion("1.20.1-1"), skipped, map[string]p.DiffKind{"pinnedVersion": p.Update}},
		{"removed by hand", in, PackageState{PackageArgs: in, Status: PackageMissing, DetectedGPUs: 1}, map[string]p.DiffKind{"pinnedVersion": p.Update}},
		{"upgraded by hand", in, PackageState{PackageArgs: in, Status: PackageOtherVersion, DetectedGPUs: 1}, map[string]p.DiffKind{"pinnedVersion": p.Update}},
		{"drop-in changed", withTrigger("def"), installed, map[string]p.DiffKind{"trigger": p.Update}},
		{"re-addressed node", moved, installed, map[string]p.DiffKind{"connection": p.Update}},
		{"another node", other, installed, map[string]p.DiffKind{"connection": p.UpdateReplace}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := packageDiff(tc.in, tc.st)
			got := map[string]p.DiffKind{}
			for k, v := range d {
				got[k] = v.Kind
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("diff %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInstallScript(t *testing.T) {
	s := installScript(toolkitArgs()).String()
	for _, want := range []string{
		"curl -fsSL '" + gpu.ToolkitKeyURL + "' -o '" + gpu.ToolkitKeyring + ".asc'",
		"gpg --dearmor --yes -o '" + gpu.ToolkitKeyring + ".tmp' '" + gpu.ToolkitKeyring + ".asc'",
		"'nvidia-container-toolkit=1.20.0-1' 'nvidia-container-toolkit-base=1.20.0-1' 'libnvidia-container-tools=1.20.0-1' 'libnvidia-container1=1.20.0-1'",
		"apt-mark hold 'nvidia-container-toolkit'",
		"if [ ! -s '" + gpu.ToolkitKeyring + "' ]",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("install script lacks %q:\n%s", want, s)
		}
	}
	scriptstest.Golden(t, installScript(toolkitArgs()), "toolkit")
	docker := PackageArgs{Names: []string{"containerd.io"}, Version: "2.2.1-1", Replaces: []string{"containerd", "runc"},
		Repository: &AptRepository{KeyURL: "https://download.docker.com/linux/debian/gpg", Keyring: "/etc/apt/keyrings/docker.gpg", SourcesPath: "/etc/apt/sources.list.d/docker.list"}}
	scriptstest.Golden(t, installScript(docker), "containerd.io")
	scriptstest.Golden(t, packageQuery(toolkitArgs()), "gpu")
	scriptstest.Golden(t, packageQuery(kubernetesArgs()), "")
	scriptstest.Golden(t, holdScript(kubernetesArgs()), "")
	if q := packageQuery(toolkitArgs()).String(); !strings.Contains(q, "nvidia-smi -L") || !strings.Contains(q, "dpkg-query -W") {
		t.Errorf("query: %s", q)
	}
	if q := packageQuery(kubernetesArgs()).String(); strings.Contains(q, "nvidia-smi") {
		t.Errorf("the query of packages that need no GPU looks for one: %s", q)
	}
}

func kubernetesArgs() PackageArgs {
	inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: "v1.34.4", Packages: inventory.Packages{Manage: true}}}
	inv.ApplyDefaults()
	in, _ := kubepkg.For(inv, []byte{0x99, 0, 1, 4})
	return PackageArgs{
		Connection: Connection{Node: "cp-1", Host: "10.0.0.120"},
		Names:      in.Packages, Version: in.Version, AnyRevision: true,
		Repository:  &AptRepository{Key: base64.StdEncoding.EncodeToString(in.Key), Keyring: in.Keyring, SourcesPath: in.SourcesPath, Sources: string(in.Sources)},
		KeepVersion: "change cluster.kubernetesVersion back",
		Enable:      "kubelet",
	}
}

// Kubernetes' packages: the declared patch in any Debian revision, held;
// a node at another version is reported, and refused rather than moved.
func TestKubernetesPackageStatus(t *testing.T) {
	in := kubernetesArgs()
	for _, tc := range []struct {
		name, out, status string
		refused           bool
	}{
		{"fresh node", "", PackageMissing, false},
		{"pkgs.k8s.io's build, held", dpkgLines("hi", "1.34.4-1.1", "kubeadm", "kubelet", "kubectl"), PackageInstalled, false},
		{"a rebuild's revision, held", dpkgLines("hi", "1.34.4-2.1", "kubeadm", "kubelet", "kubectl"), PackageInstalled, false},
		{"installed by hand, not held", dpkgLines("ii", "1.34.4-1.1", "kubeadm", "kubelet", "kubectl"), PackageNotHeld, false},
		{"kubectl missing", dpkgLines("hi", "1.34.4-1.1", "kubeadm", "kubelet"), PackageMissing, false},
		{"a patch that merely starts alike", dpkgLines("hi", "1.34.40-1.1", "kubeadm", "kubelet", "kubectl"), PackageOtherVersion, true},
		{"older patch", dpkgLines("hi", "1.34.3-1.1", "kubeadm", "kubelet", "kubectl"), PackageOtherVersion, true},
		{"next minor's kubelet", dpkgLines("hi", "1.34.4-1.1", "kubeadm", "kubectl") + dpkgLines("hi", "1.35.0-1.1", "kubelet"), PackageOtherVersion, true},
		{"with an epoch", dpkgLines("hi", "1:1.34.4-1.1", "kubeadm", "kubelet", "kubectl"), PackageInstalled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := parsePackageQuery(in.Names, tc.out)
			if st := l.state(in); st.Status != tc.status {
				t.Errorf("status %q, want %q", st.Status, tc.status)
			}
			err := versionChange(in, "cp-1", l.versions)
			if (err != nil) != tc.refused {
				t.Fatalf("refused: %v, want %v", err, tc.refused)
			}
			if err != nil && !strings.Contains(err.Error(), in.KeepVersion) {
				t.Errorf("the refusal does not say what to do: %v", err)
			}
		})
	}
	// Without KeepVersion (the toolkit) another version is converged.
	toolkit := toolkitArgs()
	if err := versionChange(toolkit, "gpu-1", map[string]string{"nvidia-container-toolkit": "1.17.8-1"}); err != nil {
		t.Errorf("toolkit refused: %v", err)
	}
}

func TestKubernetesInstallScript(t *testing.T) {
	in := kubernetesArgs()
	scriptstest.Golden(t, installScript(in), "kubernetes")
	s := installScript(in).String()
	if !strings.Contains(s, "'kubeadm=1.34.4-*' 'kubelet=1.34.4-*' 'kubectl=1.34.4-*'") {
		t.Errorf("not pinned to the patch:\n%s", s)
	}
	if !strings.Contains(s, "apt-mark hold 'kubeadm' 'kubelet' 'kubectl'") {
		t.Errorf("not held:\n%s", s)
	}
	// Only the managed repository is updated first: an unreachable mirror
	// elsewhere must not hold the install.
	if first, _, _ := strings.Cut(s[strings.Index(s, "apt-get update"):], "\n"); !strings.Contains(first, "Dir::Etc::sourcelist='"+in.Repository.SourcesPath+"'") || !strings.Contains(first, "Dir::Etc::sourceparts=-") {
		t.Errorf("the first update is not the managed repository's alone: %s", first)
	}
	if !strings.HasSuffix(s, "\nsystemctl enable 'kubelet'\n") {
		t.Errorf("the kubelet is not enabled after the install:\n%s", s)
	}
	if s := installScript(toolkitArgs()).String(); strings.Contains(s, "systemctl enable") {
		t.Errorf("the toolkit enables a unit:\n%s", s)
	}
	// The keyring is uploaded: nothing is fetched.
	if strings.Contains(s, "curl") || strings.Contains(s, "gpg") {
		t.Errorf("fetches a key it was given:\n%s", s)
	}
	// The default repository: its Release.key, fetched and dearmored.
	inv := &inventory.Inventory{Cluster: inventory.Cluster{KubernetesVersion: "v1.34.4", Packages: inventory.Packages{Manage: true}}}
	inv.ApplyDefaults()
	k, _ := kubepkg.For(inv, nil)
	in.Repository = &AptRepository{KeyURL: k.KeyURL, Keyring: k.Keyring, SourcesPath: k.SourcesPath, Sources: string(k.Sources)}
	scriptstest.Golden(t, installScript(in), "fetch-key")
	if s := installScript(in).String(); !strings.Contains(s, "curl -fsSL 'https://pkgs.k8s.io/core:/stable:/v1.34/deb/Release.key' -o '/etc/apt/keyrings/kubernetes-apt-keyring.gpg.asc'") {
		t.Errorf("default repository's key not fetched:\n%s", s)
	}
}

func TestKubernetesPackageDiff(t *testing.T) {
	in := kubernetesArgs()
	installed := PackageState{PackageArgs: in, Status: PackageInstalled}
	for _, tc := range []struct {
		name string
		st   PackageState
		in   PackageArgs
		want []string
	}{
		{"converged", installed, in, nil},
		{"not held", PackageState{PackageArgs: in, Status: PackageNotHeld}, in, []string{"pinnedVersion"}},
		{"new patch declared", installed, func() PackageArgs { a := in; a.Version = "1.34.5"; return a }(), []string{"pinnedVersion"}},
		{"another key", installed, func() PackageArgs {
			a := in
			r := *a.Repository
			r.Key = base64.StdEncoding.EncodeToString([]byte{0x99, 0, 2, 4})
			a.Repository = &r
			return a
		}(), []string{"repository"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(packageDiff(tc.in, tc.st)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("diff %v, want %v", got, tc.want)
			}
		})
	}
}

// The preview of a version bump on nodes holding the old version goes
// through (the KubernetesUpgrade before it moves them); the up itself
// refuses a node still holding the old version.
func TestKubernetesVersionBumpLeftToTheUpgrade(t *testing.T) {
	old := kubernetesArgs()
	st := PackageState{PackageArgs: old, Status: PackageInstalled, Versions: map[string]string{"kubeadm": "1.34.4-1.1", "kubelet": "1.34.4-1.1", "kubectl": "1.34.4-1.1"}}
	in := old
	in.Version = "1.35.4"
	if _, err := (Package{}).Update(context.Background(), infer.UpdateRequest[PackageArgs, PackageState]{Inputs: in, State: st, DryRun: true}); err != nil {
		t.Errorf("preview of a version bump: %v", err)
	}
	if err := versionChange(in, "cp-1", st.Versions); err == nil || !strings.Contains(err.Error(), "kubelet 1.34.4-1.1") {
		t.Errorf("a node left at the old version: %v", err)
	}
	// A fresh node (nothing installed) previews fine.
	st.Versions = map[string]string{}
	if _, err := (Package{}).Update(context.Background(), infer.UpdateRequest[PackageArgs, PackageState]{Inputs: in, State: st, DryRun: true}); err != nil {
		t.Errorf("preview on a node without packages: %v", err)
	}
}
