package main

import (
	"strings"
	"testing"
)

func TestDoctorNeedsTheBundle(t *testing.T) {
	_, stderr, code := run(t, "doctor", "-f", homelab, "--secrets", t.TempDir()+"/none.yaml")
	if code == 0 || !strings.Contains(stderr, "secrets bundle") {
		t.Errorf("doctor without a bundle: exit %d, %q", code, stderr)
	}
}

func TestHostsAcceptRefusesUnknownNode(t *testing.T) {
	_, stderr, code := run(t, "hosts", "accept", "nope", "-f", homelab)
	if code == 0 || !strings.Contains(stderr, "nope") {
		t.Errorf("hosts accept of an undeclared node: exit %d, %q", code, stderr)
	}
}
