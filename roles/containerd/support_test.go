package containerd

import (
	"strings"
	"testing"
)

// Supports against containerd's matrix: the releases real nodes run
// (Debian 12's 1.6.20, Ubuntu's 1.7, containerd.io's 2.x) under the
// Kubernetes minors homelab declares.
func TestSupports(t *testing.T) {
	for _, tc := range []struct {
		containerd, kubernetes string
		want                   Support
		says                   []string // words the reason holds
	}{
		{"1.7.28", "v1.35.4", Tested, nil},
		{"v2.2.0", "v1.35.4", Tested, nil},
		{"v2.3.1", "v1.35.4", Tested, nil}, // a newer line than the row's newest
		{"1.6.39", "v1.34.4", Tested, nil},
		{"1.6.20~ds1", "v1.34.4", Untested, []string{"v1.34", "1.6.39", "1.6.20"}},
		{"1.6.20~ds1", "v1.35.4", Untested, []string{"v1.35", "1.7.28", "1.6.20"}},
		{"v2.1.4", "v1.35.4", Untested, []string{"2.1.5"}},
		{"1.7.27", "v1.34.4", Untested, []string{"1.7.28"}},
		{"1.7.28", "v1.36.0", Unsupported, []string{"v1.35 is the last", "containerd 2.x"}},
		{"1.6.14", "v1.33.0", Unsupported, []string{"CRI v1", "1.6.15"}},
		{"1.5.9", "v1.30.1", Unsupported, []string{"1.5.9"}},
		{"v2.3.0", "v1.37.0", Unknown, []string{"v1.37"}},
	} {
		v, err := Supports(tc.containerd, tc.kubernetes)
		if err != nil {
			t.Errorf("%s under %s: %v", tc.containerd, tc.kubernetes, err)
			continue
		}
		if v.Support != tc.want {
			t.Errorf("%s under %s: %d (%s), want %d", tc.containerd, tc.kubernetes, v.Support, v.Reason, tc.want)
		}
		for _, w := range tc.says {
			if !strings.Contains(v.Reason, w) {
				t.Errorf("%s under %s: %q does not say %q", tc.containerd, tc.kubernetes, v.Reason, w)
			}
		}
	}
	for _, bad := range [][2]string{{"homelab", "v1.35.4"}, {"1.7.28", "latest"}} {
		if _, err := Supports(bad[0], bad[1]); err == nil {
			t.Errorf("%q under %q: no error", bad[0], bad[1])
		}
	}
}
