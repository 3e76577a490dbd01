package provider

import (
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	p "github.com/pulumi/pulumi-go-provider"

	"github.com/homelab-dev/homelab/roles/gpu"
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
		{"GPU, pinned version", gpuLine + dpkgLines("ii", "1.20.0-1", gpu.ToolkitPackages...), PackageInstalled, 1},
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
	s := installScript(toolkitArgs())
	for _, want := range []string{
		"curl -fsSL '" + gpu.ToolkitKeyURL + "' | gpg --dearmor",
		"'nvidia-container-toolkit=1.20.0-1' 'nvidia-container-toolkit-base=1.20.0-1' 'libnvidia-container-tools=1.20.0-1' 'libnvidia-container1=1.20.0-1'",
		"apt-mark hold 'nvidia-container-toolkit'",
		"if [ ! -s '" + gpu.ToolkitKeyring + "' ]",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("install script lacks %q:\n%s", want, s)
		}
	}
	for _, script := range []string{s, packageQuery(toolkitArgs())} {
		if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("not valid shell: %v %s\n%s", err, out, script)
		}
	}
	if q := packageQuery(toolkitArgs()); !strings.Contains(q, "nvidia-smi -L") || !strings.Contains(q, "dpkg-query -W") {
		t.Errorf("query: %s", q)
	}
}
