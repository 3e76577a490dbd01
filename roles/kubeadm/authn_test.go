package kubeadm

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	api "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/install"
	"k8s.io/apiserver/pkg/apis/apiserver/validation"
	authenticationcel "k8s.io/apiserver/pkg/authentication/cel"
)

// The AuthenticationConfiguration decodes and validates with the
// apiserver's own scheme and validation, and allows anonymous requests on
// exactly the health endpoints and cluster-info; v1.31, which cannot
// limit them by default, gets none, and no flag.
func TestAuthentication(t *testing.T) {
	if _, _, ok := Authentication("v1.31.9"); ok {
		t.Error("v1.31 got an AuthenticationConfiguration with anonymous conditions (alpha there)")
	}
	if args, vols := authenticationArgs("v1.31.9"); args != nil || vols != nil {
		t.Errorf("v1.31 got %v %v", args, vols)
	}
	scheme := runtime.NewScheme()
	install.Install(scheme)
	for _, v := range []string{"v1.32.0", "v1.34.4", "v1.35.4"} {
		path, data, ok := Authentication(v)
		if !ok || !strings.HasPrefix(path, AuthenticationDir+"/config-") {
			t.Fatalf("%s: %q %v", v, path, ok)
		}
		obj, _, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDecoder().Decode(data, nil, &api.AuthenticationConfiguration{})
		if err != nil {
			t.Fatalf("%s: the apiserver does not decode it: %v\n%s", v, err, data)
		}
		cfg := obj.(*api.AuthenticationConfiguration)
		if errs := validation.ValidateAuthenticationConfiguration(authenticationcel.NewDefaultCompiler(), cfg, nil); len(errs) > 0 {
			t.Errorf("%s: invalid: %v", v, errs.ToAggregate())
		}
		if cfg.Anonymous == nil || !cfg.Anonymous.Enabled {
			t.Fatalf("%s: anonymous off: kubelet probes and keepalived's check would fail", v)
		}
		var paths []string
		for _, c := range cfg.Anonymous.Conditions {
			paths = append(paths, c.Path)
		}
		if !slices.Equal(paths, []string{"/livez", "/readyz", "/healthz", "/api/v1/namespaces/kube-public/configmaps/cluster-info"}) {
			t.Errorf("%s: anonymous paths %v", v, paths)
		}
		if args, vols := authenticationArgs(v); len(args) != 1 || args[0].Value != path || len(vols) != 1 || vols[0].HostPath != AuthenticationDir {
			t.Errorf("%s: flag %v, volume %v", v, args, vols)
		}
	}
}
