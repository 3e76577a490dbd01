package kubeadm

import "testing"

func TestPauseImage(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"v1.35.4", "registry.k8s.io/pause:3.10.1"},
		{"v1.34.0", "registry.k8s.io/pause:3.10.1"},
		{"v1.33.7", "registry.k8s.io/pause:3.10"},
		{"v1.31.0", "registry.k8s.io/pause:3.10"},
		{"v1.30.9", ""},
		{"latest", ""},
	} {
		if got := PauseImage(tc.version); got != tc.want {
			t.Errorf("PauseImage(%s) = %q, want %q", tc.version, got, tc.want)
		}
	}
}
