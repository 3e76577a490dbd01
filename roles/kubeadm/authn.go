package kubeadm

import (
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// AuthenticationDir holds the apiserver's AuthenticationConfiguration.
const AuthenticationDir = "/etc/kubernetes/authentication"

// anonymousPaths are all an unauthenticated client may ask the apiserver:
// the health endpoints (keepalived's check, the kubelet's probes of the
// apiserver's static pod, homelab's own /readyz probe) and cluster-info,
// which kubeadm join's discovery reads before it has credentials.
// Everything else anonymous is refused before authorization, whatever
// RBAC grants system:unauthenticated (CIS 1.2.1).
var anonymousPaths = []string{"/livez", "/readyz", "/healthz", "/api/v1/namespaces/kube-public/configmaps/cluster-info"}

// firstAnonymousConditions is the first release whose apiserver limits
// anonymous requests to paths by default (AnonymousAuthConfigurableEndpoints,
// beta in v1.32, GA in v1.34); v1.31 has it behind an alpha gate.
var firstAnonymousConditions = version.MustParseGeneric("v1.32.0")

type authenticationConfiguration struct {
	TypeMeta  `json:",inline"`
	Anonymous anonymousAuth `json:"anonymous"`
}

type anonymousAuth struct {
	Enabled    bool                 `json:"enabled"`
	Conditions []anonymousCondition `json:"conditions"`
}

type anonymousCondition struct {
	Path string `json:"path"`
}

// Authentication is the apiserver's AuthenticationConfiguration for
// kubernetesVersion and the path it lands at (named by its hash, as the
// audit policy is), or ok false where the release cannot limit anonymous
// requests (v1.31: anonymous stays kubeadm's default there).
func Authentication(kubernetesVersion string) (path string, content []byte, ok bool) {
	v, err := version.ParseGeneric(kubernetesVersion)
	if err != nil || v.LessThan(firstAnonymousConditions) {
		return "", nil, false
	}
	cfg := authenticationConfiguration{
		TypeMeta:  TypeMeta{"apiserver.config.k8s.io/v1beta1", "AuthenticationConfiguration"},
		Anonymous: anonymousAuth{Enabled: true},
	}
	for _, p := range anonymousPaths {
		cfg.Anonymous.Conditions = append(cfg.Anonymous.Conditions, anonymousCondition{Path: p})
	}
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err) // constant data: a failure is a bug caught by any test
	}
	return hashedPath(AuthenticationDir, "config", doc), doc, true
}

// authenticationArgs and authenticationVolumes are the apiserver's side
// of Authentication, none where it renders nothing.
func authenticationArgs(kubernetesVersion string) ([]Arg, []HostPathMnt) {
	path, _, ok := Authentication(kubernetesVersion)
	if !ok {
		return nil, nil
	}
	return []Arg{{Name: "authentication-config", Value: path}},
		[]HostPathMnt{{Name: "authentication-config", HostPath: AuthenticationDir, MountPath: AuthenticationDir, ReadOnly: true, PathType: "DirectoryOrCreate"}}
}
