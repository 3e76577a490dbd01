package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "layouts.svg")
	stdout, stderr, code := run(t, "compare", "-f", homelab, "--svg", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "layout vip") || !strings.Contains(stdout, "layout single-ip") || !strings.Contains(stdout, "risk: kubectl") {
		t.Errorf("table lacks a layout or the single-ip risk:\n%s", stdout)
	}
	if data, err := os.ReadFile(svg); err != nil || !strings.HasPrefix(string(data), "<svg") {
		t.Errorf("no SVG written: %v", err)
	}
	stdout, _, code = run(t, "compare", "-f", homelab, "--layouts", "single-ip", "--format", "json")
	var ps []struct {
		Layout   string
		Outcomes []struct {
			Failure struct{ ID string }
			Cells   []struct{ Consumer, State string }
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &ps) != nil || len(ps) != 1 || ps[0].Layout != "single-ip" {
		t.Fatalf("json: exit %d, %d layouts", code, len(ps))
	}
	if _, _, code := run(t, "compare", "-f", homelab, "--format", "markdown"); code != 0 {
		t.Errorf("markdown: exit %d", code)
	}
}

// Bad input names the field and writes nothing.
func TestCompareBadInput(t *testing.T) {
	data, _ := os.ReadFile(homelab)
	cases := []struct {
		name, edit, layouts, field string
	}{
		{"a worker as the endpoint", "node: cp-1", "single-ip", "cluster.endpoint.node"},
		{"an unknown node as the endpoint", "node: cp-1", "single-ip", "cluster.endpoint.node"},
		{"dns without a name", "", "vip,dns", "cluster.endpoint.dnsName"},
		{"no such layout", "", "vip,round-robin", "--layouts"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			inv := filepath.Join(dir, "inv.yaml")
			s := string(data)
			if tc.edit != "" {
				repl := []string{"node: gpu-1", "node: cp-9"}[i]
				s = strings.Replace(s, tc.edit, repl, 1)
			}
			os.WriteFile(inv, []byte(s), 0o644)
			svg := filepath.Join(dir, "out.svg")
			_, stderr, code := run(t, "compare", "-f", inv, "--layouts", tc.layouts, "--svg", svg)
			if code == 0 || !strings.Contains(stderr, tc.field) {
				t.Errorf("exit %d, stderr %q: want an error naming %s", code, stderr, tc.field)
			}
			if _, err := os.Stat(svg); err == nil {
				t.Errorf("the SVG was written despite the error")
			}
		})
	}
}
