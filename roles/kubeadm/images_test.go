package kubeadm

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
)

func TestImages(t *testing.T) {
	for _, tc := range []struct {
		version    string
		kubeProxy  bool
		exact      bool
		etcd, dns  string
		wantErr    string
		wantImages int
	}{
		{version: "v1.34.4", kubeProxy: true, exact: true, etcd: "3.6.5-0", dns: "v1.12.1", wantImages: 7},
		{version: "v1.35.4", kubeProxy: false, exact: true, etcd: "3.6.6-0", dns: "v1.13.1", wantImages: 6},
		// Another patch borrows its minor's nearest measured release.
		{version: "v1.34.9", kubeProxy: true, etcd: "3.6.5-0", dns: "v1.12.1", wantImages: 7},
		{version: "v1.35.0", kubeProxy: true, etcd: "3.6.6-0", dns: "v1.13.1", wantImages: 7},
		{version: "v1.33.2", kubeProxy: true, wantErr: "kubeadm config images list"},
		{version: "latest", wantErr: "latest"},
	} {
		refs, exact, err := Images(tc.version, tc.kubeProxy)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want one naming %q", tc.version, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.version, err)
		}
		if exact != tc.exact || len(refs) != tc.wantImages {
			t.Errorf("%s: exact %v, %d images (%v), want %v, %d", tc.version, exact, len(refs), refs, tc.exact, tc.wantImages)
		}
		for _, want := range []string{Registry + "/etcd:" + tc.etcd, Registry + "/coredns/coredns:" + tc.dns, Registry + "/kube-apiserver:" + tc.version} {
			if !slices.Contains(refs, want) {
				t.Errorf("%s: %v lacks %s", tc.version, refs, want)
			}
		}
		if slices.Contains(refs, Registry+"/kube-proxy:"+tc.version) != tc.kubeProxy {
			t.Errorf("%s: kube-proxy listed = %v, want %v", tc.version, !tc.kubeProxy, tc.kubeProxy)
		}
	}
}

// kubeadm is the oracle: every version the table calls exact must list
// what kubeadm of that version lists, in its order.
func TestImagesAreKubeadms(t *testing.T) {
	for _, e := range imageTags {
		v := "v" + e.version.String()
		if v != tools.KubernetesVersion && v != tools.UpgradeKubernetesVersion {
			continue // no kubeadm of it is built here
		}
		out, err := exec.Command(toolstest.RequireKube(t, "kubeadm", v), "config", "images", "list", "--kubernetes-version", v).Output()
		if err != nil {
			t.Fatalf("kubeadm %s: %v", v, err)
		}
		refs, exact, err := Images(v, true)
		if err != nil || !exact {
			t.Fatalf("%s: exact %v, %v", v, exact, err)
		}
		if got := strings.Fields(string(out)); !slices.Equal(got, refs) {
			t.Errorf("kubeadm %s lists %v; Images says %v", v, got, refs)
		}
	}
}
