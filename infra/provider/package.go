package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/nodeprobes"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/gpu"
)

// Package is a set of Debian packages held at one pinned version, from an
// apt repository set up with its own keyring. Its live state is what dpkg
// reports. A package meant for NVIDIA GPUs (RequireNvidiaGPU) is skipped,
// not failed, on a node where no NVIDIA GPU is detected: the state says
// so, and a warning names the node and what the inventory declares.
type Package struct{}

// AptRepository is a third-party apt repository: its key, fetched once and
// dearmored into Keyring (or given, Key), and the sources list that trusts
// only that key.
type AptRepository struct {
	KeyURL string `pulumi:"keyURL,optional"`
	// Key is the dearmored keyring itself, base64: uploaded to Keyring
	// with the sources list, so nothing is fetched and a mirror cannot
	// swap it.
	Key         string `pulumi:"key,optional"`
	Keyring     string `pulumi:"keyring"`
	SourcesPath string `pulumi:"sourcesPath"`
	Sources     string `pulumi:"sources"`
}

type PackageArgs struct {
	Connection Connection `pulumi:"connection"`
	// Names are installed together, all at Version (apt's version string,
	// e.g. 1.20.0-1), and held there.
	Names []string `pulumi:"names"`
	// Not "version": the engine strips an input of that name (the
	// provider plugin's version), and decoding the state then fails.
	Version string `pulumi:"pinnedVersion"`
	// AnyRevision makes Version an upstream version (1.34.4): any Debian
	// revision of it (1.34.4-1.1, 1.34.4-2.1) is the pin, the repository's
	// newest installed.
	AnyRevision bool           `pulumi:"anyRevision,optional"`
	Repository  *AptRepository `pulumi:"repository,optional"`
	// KeepVersion, when set, refuses to move an installed package to
	// another version (it says what to do instead): Kubernetes' packages
	// change version only with kubeadm's upgrade, never by an install.
	KeepVersion string `pulumi:"keepVersion,optional"`
	// Restart is a unit restarted when the installed version changes or
	// Trigger (a checksum of config the unit reads) changes.
	Restart string `pulumi:"restart,optional"`
	Trigger string `pulumi:"trigger,optional"`
	// Enable is a unit the packages ship, enabled once they are installed
	// (kubeadm's install guide enables the kubelet, which kubeadm then
	// only starts: a rebooted node would come back without it).
	Enable string `pulumi:"enable,optional"`
	// RequireNvidiaGPU skips the install on a node without an NVIDIA GPU;
	// DeclaredGPUs is what the inventory says the node has (for the warning).
	RequireNvidiaGPU bool `pulumi:"requireNvidiaGPU,optional"`
	DeclaredGPUs     int  `pulumi:"declaredGPUs,optional"`
	// Replaces are packages Names take the place of (Docker's
	// containerd.io conflicts with the distribution's containerd and
	// runc): unheld before the install, or apt refuses to remove them
	// ("you have held broken packages"), and then removed by apt.
	Replaces []string `pulumi:"replaces,optional"`
}

// Package statuses.
const (
	PackageInstalled    = "installed"
	PackageNotHeld      = "not held"
	PackageMissing      = "not installed"
	PackageOtherVersion = "other version"
	PackageSkippedNoGPU = "skipped: no NVIDIA GPU detected"
)

type PackageState struct {
	PackageArgs
	// Versions are the installed versions of Names ("" when absent).
	Versions map[string]string `pulumi:"versions,optional"`
	// Status is one of the Package statuses.
	Status string `pulumi:"status"`
	// DetectedGPUs is how many NVIDIA GPUs the node showed (RequireNvidiaGPU only).
	DetectedGPUs int `pulumi:"detectedGPUs"`
}

func (pk *Package) Annotate(a infer.Annotator) {
	a.Describe(&pk, "Debian packages held at a pinned version from their apt repository; skipped on nodes without the NVIDIA GPU they need.")
	a.SetToken("index", "Package")
}

// packageQueryArgs are packages/query's values.
type packageQueryArgs struct {
	Names []string
	GPU   *nodeprobes.GPUDetectArgs
}

// packageQuery is read-only: the GPU detection, then one line per package
// dpkg knows, "pkg=<name> <status> <version>".
func packageQuery(in PackageArgs) scripts.Script {
	a := packageQueryArgs{Names: in.Names}
	if in.RequireNvidiaGPU {
		gpu := nodeprobes.GPUDetectAt(nodeprobes.PCIDevices)
		a.GPU = &gpu
	}
	return scripts.Render("packages/query", a)
}

// live is what packageQuery found.
type live struct {
	versions map[string]string
	held     map[string]bool
	gpus     gpu.Detection
}

func parsePackageQuery(names []string, out string) live {
	l := live{versions: map[string]string{}, held: map[string]bool{}, gpus: gpu.ParseDetection(out)}
	for _, n := range names {
		l.versions[n] = ""
	}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "pkg=")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 || len(f[1]) < 2 {
			continue
		}
		if _, want := l.versions[f[0]]; !want {
			continue
		}
		// dpkg's abbreviation: the selection (i install, h hold, ...),
		// then the state (i installed; c config files left, U unpacked,
		// F half configured, ... are not installed).
		if f[1][1] == 'i' {
			l.versions[f[0]] = f[2]
			l.held[f[0]] = f[1][0] == 'h'
		}
	}
	return l
}

// pinned says whether an installed version is the pin.
func (in PackageArgs) pinned(v string) bool {
	if !in.AnyRevision {
		return v == in.Version
	}
	return upstreamVersion(v) == in.Version
}

// upstreamVersion is a Debian version without its epoch and revision:
// 1:1.34.4-1.1 -> 1.34.4.
func upstreamVersion(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		v = v[:i]
	}
	return v
}

// aptVersion is what apt-get install asks for: the pin, or with
// AnyRevision a glob apt resolves to the newest revision of it.
func (in PackageArgs) aptVersion() string {
	if in.AnyRevision {
		return in.Version + "-*"
	}
	return in.Version
}

// status says where the node stands against the pin.
func (l live) status(in PackageArgs) string {
	if in.RequireNvidiaGPU && !l.gpus.Present() {
		return PackageSkippedNoGPU
	}
	missing, other, loose := false, false, false
	for _, n := range in.Names {
		switch v := l.versions[n]; {
		case v == "":
			missing = true
		case !in.pinned(v):
			other = true
		case !l.held[n]:
			loose = true
		}
	}
	switch {
	case other:
		return PackageOtherVersion
	case missing:
		return PackageMissing
	case loose:
		return PackageNotHeld
	}
	return PackageInstalled
}

// versionChange is the refusal KeepVersion asks for, when an installed
// package is at another version than the pin; nil otherwise.
func versionChange(in PackageArgs, node string, versions map[string]string) error {
	if in.KeepVersion == "" {
		return nil
	}
	var moved []string
	for _, n := range in.Names {
		if v := versions[n]; v != "" && !in.pinned(v) {
			moved = append(moved, n+" "+v)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s installed, and %s is declared: up does not move installed packages to another version. %s",
		node, strings.Join(moved, ", "), in.Version, in.KeepVersion)
}

// installedOf lists "name version" of the names installed.
func installedOf(names []string, versions map[string]string) []string {
	var out []string
	for _, n := range names {
		if v := versions[n]; v != "" {
			out = append(out, n+" "+v)
		}
	}
	return out
}

func (l live) state(in PackageArgs) PackageState {
	return PackageState{PackageArgs: in, Versions: l.versions, Status: l.status(in), DetectedGPUs: l.gpus.Count()}
}

func readPackage(ctx context.Context, c ssh.Executor, in PackageArgs) (live, error) {
	out, _, err := query(ctx, c, packageQuery(in))
	if err != nil {
		return live{}, fmt.Errorf("%s: reading %s: %w", in.Connection.Node, strings.Join(in.Names, ", "), err)
	}
	return parsePackageQuery(in.Names, out), nil
}

// installScript sets up the repository (the key only when its keyring is
// missing; the sources list was uploaded before), installs every package at
// the pinned version and holds them there, so an unattended upgrade never
// moves them.
func installScript(in PackageArgs) scripts.Script {
	a := installArgs{Names: in.Names, Enable: in.Enable, Replaces: in.Replaces}
	for _, n := range in.Names {
		a.Pinned = append(a.Pinned, n+"="+in.aptVersion())
	}
	if r := in.Repository; r != nil {
		a.Repo = &repoArgs{Sources: r.SourcesPath, Keyring: r.Keyring, KeyURL: r.KeyURL, Fetch: r.Key == ""}
	}
	return scripts.Render("packages/install", a)
}

// installArgs are packages/install's values (and packages/hold's: Names).
type installArgs struct {
	Names, Pinned, Replaces []string
	Enable                  string
	Repo                    *repoArgs
}

// repoArgs is the repository packages/install updates alone: its
// sources list, and its key, fetched from KeyURL into Keyring when Fetch
// (no key was given to upload).
type repoArgs struct {
	Sources, Keyring, KeyURL string
	Fetch                    bool
}

func holdScript(in PackageArgs) scripts.Script {
	return scripts.Render("packages/hold", installArgs{Names: in.Names})
}

// uploadRepository writes the sources list, and the keyring when the
// repository's key is given rather than fetched.
func uploadRepository(ctx context.Context, c ssh.Executor, node string, r *AptRepository) error {
	if r.Key != "" {
		key, err := base64.StdEncoding.DecodeString(r.Key)
		if err != nil {
			return fmt.Errorf("%s: the repository key for %s is not base64: %w", node, r.Keyring, err)
		}
		if err := c.Upload(ctx, r.Keyring, key, os.FileMode(0o644)); err != nil {
			return fmt.Errorf("%s: writing %s: %w", node, r.Keyring, err)
		}
	}
	if err := c.Upload(ctx, r.SourcesPath, []byte(r.Sources), os.FileMode(0o644)); err != nil {
		return fmt.Errorf("%s: writing %s: %w", node, r.SourcesPath, err)
	}
	return nil
}

// converge brings the node to the pin and returns the state it left it in.
// Nothing is run but reads when the node is already there (or skipped).
func convergePackage(ctx context.Context, in, old PackageArgs) (PackageState, error) {
	node := in.Connection.Node
	c, err := dial(ctx, in.Connection)
	if err != nil {
		return PackageState{}, err
	}
	defer c.Close()
	// An install an earlier up left running (its connection dropped, the
	// up killed) is waited for before dpkg is read: its packages may be
	// half unpacked until then.
	if _, err := settleDetached(ctx, c, node, aptRun, "apt install"); err != nil {
		p.GetLogger(ctx).Warningf("%s: the earlier install: %v; dpkg decides what is due now", node, err)
	}
	l, err := readPackage(ctx, c, in)
	if err != nil {
		return PackageState{}, err
	}
	st := l.state(in)
	if st.Status == PackageSkippedNoGPU {
		p.GetLogger(ctx).Warningf("%s: no NVIDIA GPU detected (nvidia-smi lists none, no /dev/nvidia0, no NVIDIA display device on PCI) though the inventory declares %d; %s not installed. Check the node, or fix its gpus in the inventory",
			node, in.DeclaredGPUs, strings.Join(in.Names, ", "))
		return st, nil
	}
	if err := versionChange(in, node, l.versions); err != nil {
		return st, err
	}
	changed := st.Status != PackageInstalled && st.Status != PackageNotHeld
	if r := in.Repository; r != nil && (changed || !equalRepo(r, old.Repository)) {
		if err := uploadRepository(ctx, c, node, r); err != nil {
			return PackageState{}, err
		}
	}
	if st.Status == PackageNotHeld {
		// Installed at the pin by someone else (or before the hold was
		// ours): holding them is all that is due.
		if _, err := must(ctx, c, node, "holding "+strings.Join(in.Names, ", "), holdScript(in)); err != nil {
			return PackageState{}, err
		}
		if l, err = readPackage(ctx, c, in); err != nil {
			return PackageState{}, err
		}
		st = l.state(in)
	}
	if changed {
		// Detached: apt cut off half-way leaves dpkg locked and packages
		// half configured.
		if _, err := runDetached(ctx, c, node, aptRun, "installing "+strings.Join(in.Names, ", ")+" "+in.Version+
			" (apt needs the node to reach its repository; an offline node needs a local mirror)", installScript(in)); err != nil {
			return PackageState{}, err
		}
		if l, err = readPackage(ctx, c, in); err != nil {
			return PackageState{}, err
		}
		if st = l.state(in); st.Status != PackageInstalled {
			return PackageState{}, fmt.Errorf("%s: after installing, dpkg reports %v (%s), not %s held", node, l.versions, st.Status, in.Version)
		}
	}
	if in.Restart != "" && (changed || in.Trigger != old.Trigger) {
		if _, err := must(ctx, c, node, "restarting "+in.Restart, unitScript("restart", in.Restart)); err != nil {
			return PackageState{}, err
		}
	}
	return st, nil
}

func (Package) Create(ctx context.Context, req infer.CreateRequest[PackageArgs]) (infer.CreateResponse[PackageState], error) {
	in := req.Inputs
	id := in.Connection.Node + ":" + strings.Join(in.Names, ",")
	if req.DryRun {
		return infer.CreateResponse[PackageState]{ID: id, Output: PackageState{PackageArgs: in}}, nil
	}
	st, err := convergePackage(ctx, in, PackageArgs{})
	if err != nil {
		return infer.CreateResponse[PackageState]{}, err
	}
	return infer.CreateResponse[PackageState]{ID: id, Output: st}, nil
}

// packageRead: packages on a node refusing the key read as missing, so the
// up converges them with the current key (convergePackage reads dpkg
// first and installs nothing that is there).
var packageRead = keepOrRecheck(func(st PackageState) PackageState {
	st.Status = PackageMissing
	return st
})

func (Package) Read(ctx context.Context, req infer.ReadRequest[PackageArgs, PackageState]) (infer.ReadResponse[PackageArgs, PackageState], error) {
	ctx = reading(ctx)
	st, err := readNode(ctx, req.State.Connection, req.State, packageRead, func(c ssh.Executor) (PackageState, error) {
		l, err := readPackage(ctx, c, req.State.PackageArgs)
		if err != nil {
			return req.State, err
		}
		return l.state(req.State.PackageArgs), nil
	})
	if err != nil {
		return infer.ReadResponse[PackageArgs, PackageState]{}, err
	}
	return infer.ReadResponse[PackageArgs, PackageState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// Diff compares the pin with what dpkg last reported. A node skipped for
// want of a GPU shows no drift (there is nothing to converge) unless the
// declaration itself changed; once a GPU shows up, refresh reads it and the
// install is due.
func (Package) Diff(ctx context.Context, req infer.DiffRequest[PackageArgs, PackageState]) (infer.DiffResponse, error) {
	return packageDiff(req.Inputs, req.State).diff(true), nil
}

func packageDiff(in PackageArgs, st PackageState) changeSet {
	d := changeSet{}
	if in.Connection.Node != st.Connection.Node {
		d.replace("connection")
	} else if in.Connection != st.Connection {
		d.update("connection")
	}
	if !slices.Equal(in.Names, st.Names) {
		d.update("names")
	}
	if in.Version != st.Version || (st.Status != PackageSkippedNoGPU && st.Status != PackageInstalled) {
		d.update("pinnedVersion")
	}
	if in.AnyRevision != st.AnyRevision {
		d.update("anyRevision")
	}
	if in.KeepVersion != st.KeepVersion {
		d.update("keepVersion")
	}
	if !equalRepo(in.Repository, st.Repository) {
		d.update("repository")
	}
	if in.Restart != st.Restart {
		d.update("restart")
	}
	if in.Enable != st.Enable {
		d.update("enable")
	}
	if in.Trigger != st.Trigger {
		d.update("trigger")
	}
	if in.RequireNvidiaGPU != st.RequireNvidiaGPU {
		d.update("requireNvidiaGPU")
	}
	if in.DeclaredGPUs != st.DeclaredGPUs {
		d.update("declaredGPUs")
	}
	return d
}

func equalRepo(a, b *AptRepository) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (Package) Update(ctx context.Context, req infer.UpdateRequest[PackageArgs, PackageState]) (infer.UpdateResponse[PackageState], error) {
	in, old := req.Inputs, req.State
	if req.DryRun {
		// A version change is the KubernetesUpgrade's, which runs before
		// this step: the preview says so rather than refusing it from
		// what dpkg reported last; the up refuses it on a node the
		// upgrade left behind.
		if err := versionChange(in, in.Connection.Node, old.Versions); err != nil {
			p.GetLogger(ctx).Infof("%s: %s installed now; the Kubernetes upgrade before this step moves them to %s", in.Connection.Node, strings.Join(installedOf(in.Names, old.Versions), ", "), in.Version)
		}
		st := old
		st.PackageArgs = in
		return infer.UpdateResponse[PackageState]{Output: st}, nil
	}
	st, err := convergePackage(ctx, in, old.PackageArgs)
	if err != nil {
		return infer.UpdateResponse[PackageState]{}, err
	}
	return infer.UpdateResponse[PackageState]{Output: st}, nil
}

// Delete leaves the packages installed: a node that no longer declares a
// GPU loses the containerd drop-in that uses them, and a node leaving the
// cluster is reset by its join's delete.
func (Package) Delete(ctx context.Context, req infer.DeleteRequest[PackageState]) (infer.DeleteResponse, error) {
	return infer.DeleteResponse{}, nil
}
