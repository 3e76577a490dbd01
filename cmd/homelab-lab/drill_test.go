package main

import (
	"strings"
	"testing"
)

// A drill that cannot be made is refused, naming the flag and the node,
// before any lab is looked at.
func TestDrillBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--fail", "gpu-1", "--how", "apiserver"}, []string{"--fail", "gpu-1 is a worker"}},
		{[]string{"--fail", "cp-1,cp-9", "--how", "cut"}, []string{`"cp-9" is not a node`}},
		{[]string{"--fail", "cp-1", "--how", "reboot"}, []string{"--how", "power-off"}},
		{[]string{"--fail", "cp-1,cp-2,cp-3"}, []string{"--fail", "two"}},
	}
	for _, tc := range cases {
		args := append([]string{"drill", "-f", "../../inventory/lab.yaml", "--state-dir", t.TempDir(), "--dir", t.TempDir()}, tc.args...)
		_, stderr, code := run(t, args...)
		if code == 0 {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: %q lacks %q", tc.args, stderr, w)
			}
		}
		if strings.Contains(stderr, "not up") {
			t.Errorf("%v: the lab was looked at before the input was checked: %s", tc.args, stderr)
		}
	}
}
