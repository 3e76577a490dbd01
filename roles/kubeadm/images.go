package kubeadm

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// Registry is kubeadm's default imageRepository, where every image it
// lists comes from (an air-gapped node gets them through its mirror).
const Registry = "registry.k8s.io"

// imageTags are the etcd and CoreDNS tags `kubeadm config images list
// --kubernetes-version V` printed for each V measured here. kubeadm bumps
// them within a minor (v1.34.0 deploys another etcd than v1.34.4), so a
// version not in the table borrows its minor's nearest entry and says so.
var imageTags = []struct {
	version       *version.Version
	etcd, coredns string
}{
	{version.MustParseSemantic("v1.35.4"), "3.6.6-0", "v1.13.1"},
	{version.MustParseSemantic("v1.34.4"), "3.6.5-0", "v1.12.1"},
}

// Images is what kubeadm of kubernetesVersion pulls, in its own order:
// the control plane, kube-proxy (unless its addon is skipped), CoreDNS,
// pause and etcd. Exact is false when the etcd and CoreDNS tags are those
// of another patch release of the same minor; kubeadm itself is then the
// authority (`kubeadm config images list`). A minor with no entry is an
// error, as guessing would leave an air-gapped pull to fail on the node.
func Images(kubernetesVersion string, kubeProxy bool) (refs []string, exact bool, err error) {
	v, err := version.ParseSemantic(kubernetesVersion)
	if err != nil {
		return nil, false, fmt.Errorf("kubernetes version %q: %w", kubernetesVersion, err)
	}
	pause := PauseImage(kubernetesVersion)
	found := -1
	for i, e := range imageTags {
		if e.version.Major() != v.Major() || e.version.Minor() != v.Minor() {
			continue
		}
		if found < 0 || better(e.version, imageTags[found].version, v) {
			found = i
		}
	}
	exact = found >= 0 && imageTags[found].version.EqualTo(v)
	if found < 0 || pause == "" {
		return nil, false, fmt.Errorf("the etcd and CoreDNS images kubeadm %s deploys are not known to this homelab; ask kubeadm %s itself (`kubeadm config images list --kubernetes-version %s`, or --kubeadm PATH here)", kubernetesVersion, kubernetesVersion, kubernetesVersion)
	}
	tag := "v" + v.String()
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		refs = append(refs, Registry+"/"+c+":"+tag)
	}
	if kubeProxy {
		refs = append(refs, Registry+"/kube-proxy:"+tag)
	}
	e := imageTags[found]
	refs = append(refs, Registry+"/coredns/coredns:"+e.coredns, pause, Registry+"/etcd:"+e.etcd)
	return refs, exact, nil
}

// better reports whether measured version a stands in for v better than
// b: v itself, else the highest release below v (kubeadm only moves its
// tags forward), else the lowest above.
func better(a, b, v *version.Version) bool {
	aBelow, bBelow := !v.LessThan(a), !v.LessThan(b)
	switch {
	case aBelow != bBelow:
		return aBelow
	case aBelow:
		return b.LessThan(a)
	default:
		return a.LessThan(b)
	}
}
