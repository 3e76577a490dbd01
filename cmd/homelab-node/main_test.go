package main

import (
	"reflect"
	"testing"
)

func TestDispatch(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		name string
		args []string
	}{
		{[]string{"/usr/bin/systemctl", "is-active", "kubelet"}, "systemctl", []string{"is-active", "kubelet"}},
		{[]string{"kubelet", "--version"}, "kubelet", []string{"--version"}},
		{[]string{"/usr/local/bin/homelab-node", "init", "--root", "/x"}, "init", []string{"--root", "/x"}},
		{[]string{"homelab-node", "containerd"}, "containerd", []string{}},
		// The pause image's binary in the lab's image tree.
		{[]string{"/usr/lib/homelab/images/registry.k8s.io/pause/3.10.1/pause", "-v"}, "pause", []string{"-v"}},
		{[]string{"pause"}, "pause", []string{}},
		// argv[0] wins: systemctl is not asked to run "kubelet" as a command.
		{[]string{"/usr/bin/systemctl", "kubelet"}, "systemctl", []string{"kubelet"}},
		{[]string{"homelab-node", "bogus"}, "", nil},
		{[]string{"homelab-node"}, "", nil},
	} {
		name, args := dispatch(tc.argv)
		if name != tc.name || (tc.name != "" && !reflect.DeepEqual(args, tc.args)) {
			t.Errorf("dispatch(%q) = %q %q, want %q %q", tc.argv, name, args, tc.name, tc.args)
		}
	}
}
