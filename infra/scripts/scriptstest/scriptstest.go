// Package scriptstest keeps each script's golden rendering: the test that
// owns a script's data renders it with Golden, and infra/scripts' own
// test checks every golden with sh -n, bash -n and shellcheck.
package scriptstest

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
)

var update = flag.Bool("update", false, "rewrite the scripts' golden renderings under infra/scripts/testdata/golden")

// Dir is the golden renderings' directory, found from the test's own
// package directory (go test runs a test there).
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "infra", "scripts", "testdata", "golden")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("scriptstest: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Path is the golden file of s's rendering called variant ("" for a
// script rendered one way only): testdata/golden/NAME[@VARIANT].sh.
func Path(t testing.TB, s scripts.Script, variant string) string {
	name := s.Name()
	if variant != "" {
		if strings.ContainsAny(variant, "/@") {
			t.Fatalf("scriptstest: variant %q: no / or @ in a variant's name", variant)
		}
		name += "@" + variant
	}
	return filepath.Join(Dir(t), filepath.FromSlash(name)+".sh")
}

// Golden compares s with its golden rendering (go test -update rewrites
// it): a change to a script, or to what a step gives it, shows in review
// as a diff of the shell the node receives.
func Golden(t testing.TB, s scripts.Script, variant string) {
	t.Helper()
	p := Path(t, s, variant)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("%s: no golden rendering (go test -update writes it): %v", s.Name(), err)
		return
	}
	if string(want) != s.String() {
		t.Errorf("%s differs from its golden rendering %s (go test -update rewrites it; review the diff):\n%s", s.Name(), p, diff(string(want), s.String()))
	}
}

// diff shows the first lines that differ, enough to see what changed.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  golden: " + wl + "\n  now:    " + gl + "\n")
			shown++
		}
	}
	return b.String()
}
