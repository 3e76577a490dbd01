package inventory

import (
	"regexp"
	"strings"

	"github.com/homelab-dev/homelab/roles/containerd"
)

// checkContainerRuntime: a managed runtime is containerd, so kubeadm and
// the kubelet must be told containerd's socket.
func checkContainerRuntime(ps *problems, inv *Inventory) {
	c := inv.Cluster
	// A socket that is not a unix one has its own error.
	unix := strings.HasPrefix(c.CRISocket, "unix://") || strings.HasPrefix(c.CRISocket, "/")
	if c.ContainerRuntime.Manage && unix && "unix://"+strings.TrimPrefix(c.CRISocket, "unix://") != DefaultCRISocket {
		ps.errorf("cluster.criSocket", "%q is not containerd's socket, and cluster.containerRuntime.manage: true configures containerd; "+
			"use %s, or manage: false for another runtime", c.CRISocket, DefaultCRISocket)
	}
	checkRuntimePackages(ps, inv)
}

// debVersion is Debian policy's version syntax: [epoch:]upstream[-revision],
// the upstream part starting with a digit.
var debVersion = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$`)

// UpstreamVersion is an apt version without its epoch and Debian
// revision: the release as its authors number it (1.6.20~ds1).
func UpstreamVersion(v string) string {
	if i := strings.Index(v, ":"); i >= 0 && !strings.Contains(v[:i], ".") {
		v = v[i+1:]
	}
	if i := strings.LastIndex(v, "-"); i > 0 {
		v = v[:i]
	}
	return v
}

// checkRuntimePackages: the versions to install are apt versions, and the
// containerd one is a release the declared kubelet runs on and whose
// configuration up writes (1.x), checked here so nothing is installed
// that up would then refuse.
func checkRuntimePackages(ps *problems, inv *Inventory) {
	rt := inv.Cluster.ContainerRuntime
	p := rt.Packages
	if p == nil {
		return
	}
	const path = "cluster.containerRuntime.packages"
	if !rt.Manage {
		ps.errorf(path, "installs containerd for up to configure, and cluster.containerRuntime.manage is false: set it to true, or remove packages and install containerd yourself")
	}
	valid := true
	pins := []struct{ name, version, example string }{{"containerd", p.Containerd, "1.6.20~ds1-1+deb12u3"}, {"runc", p.Runc, "1.1.5+ds1-1+deb12u1"}}
	if p.Repository != nil {
		checkRuntimeRepository(ps, p)
		pins = pins[:1]
	}
	for _, pkg := range pins {
		switch {
		case pkg.version == "":
			ps.errorf(path+"."+pkg.name, "is required with packages: the version apt installs and holds, as `apt-cache policy %s` on a node lists it (e.g. %s)", pkg.name, pkg.example)
			valid = valid && pkg.name != "containerd"
		case !debVersion.MatchString(pkg.version):
			ps.errorf(path+"."+pkg.name, "%q is not an apt version: give it as `apt-cache policy %s` on a node lists it (e.g. %s)", pkg.version, pkg.name, pkg.example)
			valid = valid && pkg.name != "containerd"
		}
	}
	if !valid || !semverish.MatchString(inv.Cluster.KubernetesVersion) {
		return // said above, or kubernetesVersion's own error
	}
	upstream := UpstreamVersion(p.Containerd)
	v, err := containerd.Supports(upstream, inv.Cluster.KubernetesVersion)
	switch {
	case err != nil:
		ps.errorf(path+".containerd", "%q: %v", p.Containerd, err)
	case v.Support == containerd.Unsupported:
		ps.errorf(path+".containerd", "%s: %s", p.Containerd, v.Reason)
	case rt.ContainerdMajor() > 2:
		ps.errorf(path+".containerd", "%s is containerd %d.x, and homelab writes the configuration of containerd 1.x and 2.x: pin a 2.x release", p.Containerd, rt.ContainerdMajor())
	case v.Support == containerd.Untested:
		ps.warnf(path+".containerd", "%s: %s; it runs, but pin a tested release before it is what stops a Kubernetes upgrade", p.Containerd, v.Reason)
	}
}

// RuntimeKeyringField names the runtime repository's keyring.
const RuntimeKeyringField = "cluster.containerRuntime.packages.repository.keyring"

// DockerRepository is Docker's apt repository for Debian; /ubuntu beside
// it is Ubuntu's.
const DockerRepository = "https://download.docker.com/linux/debian"

// suiteName is an apt suite as Docker's repository names them: a
// release's codename.
var suiteName = regexp.MustCompile(`^[a-z][a-z0-9.-]*$`)

// checkRuntimeRepository: Docker's layout, holding containerd.io, which
// bundles runc (and conflicts with the distribution's).
func checkRuntimeRepository(ps *problems, p *RuntimePackages) {
	const path = "cluster.containerRuntime.packages"
	r := p.Repository
	if p.Runc != "" {
		ps.errorf(path+".runc", "%q: the repository's containerd.io bundles its own runc and replaces the distribution's; remove runc", p.Runc)
	}
	u, ok := checkAptURL(ps, path+".repository.url", r.URL, r.URL, DockerRepository+" (or /linux/ubuntu, or a mirror of either)")
	if ok && u.Scheme == "http" && r.Keyring == "" {
		ps.errorf(RuntimeKeyringField, "is required with an http repository (%s): the nodes would fetch the signing key itself unauthenticated; give the repository's key, dearmored, as a file on this machine", r.URL)
	}
	switch {
	case r.Suite == "":
		ps.errorf(path+".repository.suite", "is required: the nodes' release codename, which Docker builds packages for (bookworm, trixie, jammy, noble; VERSION_CODENAME in a node's /etc/os-release)")
	case !suiteName.MatchString(r.Suite):
		ps.errorf(path+".repository.suite", "%q is not a release codename: give VERSION_CODENAME from a node's /etc/os-release (bookworm, noble)", r.Suite)
	}
	if r.Component != "" && !suiteName.MatchString(r.Component) {
		ps.errorf(path+".repository.component", "%q is not one of the repository's channels: stable (the default) or test", r.Component)
	}
}

// RuntimeRepository is the runtime packages' repository, nil when they
// come from the nodes' own apt sources.
func (rt ContainerRuntime) RuntimeRepository() *RuntimeRepository {
	if rt.Packages == nil {
		return nil
	}
	return rt.Packages.Repository
}

// ContainerdMajor is the major version of the containerd up configures:
// the pinned one's, else 1, the distributions' containerd (the Host
// refuses a node running another).
func (rt ContainerRuntime) ContainerdMajor() int {
	if rt.Packages == nil {
		return 1
	}
	n, err := containerd.Major(UpstreamVersion(rt.Packages.Containerd))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// semverish is a kubernetesVersion worth judging a runtime against.
var semverish = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+`)
